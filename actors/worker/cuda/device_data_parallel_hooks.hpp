#pragma once
// The trainer's data-parallel hooks for gradients in device memory (CUDA backends): each
// gradient bucket is all-reduced by NCCL on the communicator's stream, ordered after the
// backward kernels that filled it, so the sums overlap the rest of backward as the host path's
// do. Scalars (the loss's mean over ranks) stay on the host group's hooks. While the worker waits
// for the device it still takes its mailbox's orders: a stop or rescue aborts the communicator
// and ends the wait as it would a host wait; an NCCL error aborts it and throws CommFailed.
// ZeRO (sharded optimizer state) is not wired to NCCL: zero_stage must be none.

#include "actors/worker/mailbox_comm.hpp"
#include "comm/nccl/nccl_comm.hpp"
#include "compute/train/trainer.hpp"
#include "monitor/work_progress.hpp"

namespace troupe::actors {

// `host` are the same group's host hooks (group_data_parallel): rank, size and the scalar sums
// come from them. `nccl`, `mailbox` and `progress` must outlive the returned hooks.
compute::DataParallel device_data_parallel(comm::NcclComm& nccl, compute::DataParallel host, MailboxComm& mailbox,
                                           monitor::WorkProgress& progress);

}  // namespace troupe::actors
