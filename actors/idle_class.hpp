#pragma once
// The idle scheduling class (SCHED_IDLE) for a whole process. A node process of simulated ranks
// enters it when the job starts its ranks (node/node_process.cpp): hundreds of rank threads on a few
// cores then take the cores only when the job process, the shell, a drill and a node process
// still starting (one started again in place of a lost one) leave them idle, as on a cluster,
// where those do not share the ranks' cores (docs/scale.md). Idle-class threads share the cores
// among themselves as before.

#include "compute/expected.hpp"

namespace troupe::actors {

// Every thread of this process, and so every thread it starts from now on, enters the idle
// scheduling class. Fails, naming the reason, where the threads cannot be listed or the kernel
// refuses; threads already moved stay idle-class.
Status enter_idle_scheduling_class();

// Every thread of process `pid` back in the normal scheduling class (SCHED_OTHER), at once: what a
// drill does to a node process it has just SIGKILLed. Each thread of a killed process must run
// once to exit, and the job learns of the loss when the last one has; idle-class threads among a
// thousand busy sim ranks wait seconds for a core (4.3 s at 1,024 ranks on 2 cores, docs/scale.md),
// where a node's process on its own machine dies at once. Threads already gone are passed over.
// False where the threads cannot be listed (the process not gone) or the kernel refuses a thread.
bool leave_idle_scheduling_class(int pid);

// SIGKILL to node process `pid`, then its threads out of the idle scheduling class, so that it dies
// at once whoever kills it: a drill or the shell's `kill node`. (The job's own kill of a silent
// process needs none: it starts the node's new process without waiting for the old one to end.)
// False, errno set, where the signal was not delivered; where the class cannot be left (an
// unprivileged user whose RLIMIT_NICE forbids nice 0, say) the process dies at its own pace.
bool kill_node_process(int pid);

}  // namespace troupe::actors
