#pragma once
// What a process says when a fault's signal hits it (SIGSEGV, SIGBUS, SIGILL, SIGFPE), before it
// dies of it: one line on stderr — the signal, the faulting address (or the pid that sent it),
// the process's pid and thread — and a
// backtrace, written without allocating. A node process's stderr reaches the job's log under the
// node's name.
//
// Why our own handler: UCX installs one when it loads, and it prints its backtrace through
// allocating code. A fault from a corrupted heap then deadlocked it in malloc: the faulting
// thread stopped for good while the node's other threads went on beating its heartbeat, so the
// job saw a live node that would never answer, and waited on it. A process that dies is found at
// once (the job's down_msg) and recovered from.

namespace troupe::monitor {

// Installs the report for the four signals, over whatever handled them (UCX's): call at the
// start of main, after the shared libraries have loaded. The first call of the unwinder happens
// here, so that the report does not load it in a dying process.
void report_fatal_signals();

// Whether `signal`'s handler is the report (for the test that installs it over UCX's).
bool reports_fatal_signal(int signal);

}  // namespace troupe::monitor
