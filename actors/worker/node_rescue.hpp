#pragma once
// A worker's part in the job's rescue snapshots (docs/architecture.md, "Failures"): when its step
// throws, it learns from its mailbox whether the job wants its memory of the last completed step
// written — the order may already have ended the step (RescueRequested), or, after a collective
// failed on a lost peer (CommFailed), it waits for the job's word: a rescue order or a stop — and
// answers the job when the write is done. The word may instead be an in-place recovery's order (the
// lost peer's node process is started again): the hooks throw it as RecoveryOrdered, and the worker
// goes on as a survivor.

#include <caf/all.hpp>

#include "actors/supervision/rescue_timing.hpp"
#include "actors/worker/training_run.hpp"

namespace troupe::actors {

// The hooks of `worker`'s rank `rank`; they live in the worker's thread. `timing` says how long
// the worker waits for the job's word and how long a writer's commit may take.
RescueHooks node_rescue_hooks(caf::blocking_actor* worker, int rank, const RescueTiming& timing);

}  // namespace troupe::actors
