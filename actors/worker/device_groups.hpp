#pragma once
// A node's ranks on a CUDA backend: the device each uses, the NCCL ids of the data-parallel
// groups they lead (sent to the job in join_msg, relayed to every rank in start_msg: the id
// travels over the control plane), and the NCCL communicator and hooks each rank trains with.
// A build without the CUDA backend refuses a device backend in make_backend before any of this is reached;
// here it answers with the same refusal.

#include <memory>
#include <string>
#include <vector>

#include "actors/worker/mailbox_comm.hpp"
#include "actors/messages.hpp"
#include "comm/grid.hpp"
#include "compute/backend.hpp"
#include "compute/train/trainer.hpp"
#include "monitor/work_progress.hpp"

namespace troupe::actors {

// The calling thread works on the device of `local_rank` (its rank among the host's workers).
Status use_rank_device(int local_rank);

// One NCCL id for each data-parallel group of `grid` whose leader is one of the node's ranks,
// [first_rank, first_rank + slots).
Expected<std::vector<actors::device_group_id>> lead_device_groups(const comm::Grid& grid, int first_rank, int slots);

// A rank's NCCL communicator over its data-parallel group, made from the id the group's leader
// sent; it must outlive the training that uses its hooks.
class DeviceGroup {
 public:
  // Waits for the whole group to assemble, at most a minute.
  static Expected<std::unique_ptr<DeviceGroup>> join(const actors::start_msg& start, const comm::Grid& grid, int rank,
                                                     compute::Backend& backend);
  ~DeviceGroup();
  DeviceGroup(const DeviceGroup&) = delete;
  DeviceGroup& operator=(const DeviceGroup&) = delete;

  // The host group's hooks with the gradient sums moved to NCCL.
  compute::DataParallel data_parallel(compute::DataParallel host, actors::MailboxComm& mailbox,
                                      monitor::WorkProgress& progress);

 private:
  struct Members;
  explicit DeviceGroup(std::unique_ptr<Members> members);
  std::unique_ptr<Members> members_;
};

}  // namespace troupe::actors
