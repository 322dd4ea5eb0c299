#include "actors/worker/device_groups.hpp"

#include <algorithm>
#include <chrono>
#include <tuple>

#ifdef TROUPE_HAVE_CUDA
#include "actors/worker/cuda/device_data_parallel_hooks.hpp"
#include "comm/nccl/nccl_comm.hpp"
#include "compute/cuda/cuda_backend.hpp"
#include "compute/cuda/device.hpp"
#endif

namespace troupe::actors {
namespace {

constexpr std::chrono::seconds group_assembly_limit{60};

#ifndef TROUPE_HAVE_CUDA
Error no_cuda() { return Error{"this build has no CUDA support (no nvcc, cuBLAS and NCCL at configure time)"}; }
#endif

}  // namespace

#ifdef TROUPE_HAVE_CUDA

struct DeviceGroup::Members {
  std::unique_ptr<comm::NcclComm> nccl;
};

Status use_rank_device(int local_rank) { return compute::use_cuda_device(local_rank); }

Expected<std::vector<actors::device_group_id>> lead_device_groups(const comm::Grid& grid, int first_rank, int slots) {
  std::vector<actors::device_group_id> ids;
  for (int rank = first_rank; rank < first_rank + slots; ++rank) {
    const comm::Group group = comm::dp_group(grid, rank);
    if (group.ranks.front() != rank) continue;
    auto id = comm::NcclComm::make_id();
    if (!id) return Error{"rank " + std::to_string(rank) + ": " + id.error().message};
    ids.push_back({group.id, rank, actors::byte_blob{{id->begin(), id->end()}}});
  }
  return ids;
}

Expected<std::unique_ptr<DeviceGroup>> DeviceGroup::join(const actors::start_msg& start, const comm::Grid& grid,
                                                         int rank, compute::Backend& backend) {
  const comm::Group group = comm::dp_group(grid, rank);
  const actors::device_group_id* found = nullptr;
  for (const auto& node : start.nodes)
    for (const auto& id : node.device_group_ids)
      if (id.group == group.id && id.leader_rank == group.ranks.front()) found = &id;
  if (found == nullptr || found->id.bytes.size() != std::tuple_size_v<comm::NcclId>)
    return Error{"rank " + std::to_string(rank) + ": the start message has no NCCL id for " + group.describe() +
                 " from its leader, rank " + std::to_string(group.ranks.front())};
  auto* cuda = dynamic_cast<compute::CudaBackend*>(&backend);
  TROUPE_CHECK(cuda != nullptr, "a device group needs the CUDA backend, got " + backend.name());
  comm::NcclId id;
  std::copy(found->id.bytes.begin(), found->id.bytes.end(), reinterpret_cast<std::uint8_t*>(id.data()));
  auto nccl = comm::NcclComm::create(id, group.size(), group.position_of(rank), cuda->stream(),
                                     std::chrono::duration_cast<std::chrono::milliseconds>(group_assembly_limit));
  if (!nccl) return nccl.error();
  auto members = std::make_unique<Members>();
  members->nccl = std::move(*nccl);
  return std::unique_ptr<DeviceGroup>(new DeviceGroup(std::move(members)));
}

compute::DataParallel DeviceGroup::data_parallel(compute::DataParallel host, actors::MailboxComm& mailbox,
                                                 monitor::WorkProgress& progress) {
  return actors::device_data_parallel(*members_->nccl, std::move(host), mailbox, progress);
}

#else

struct DeviceGroup::Members {};

Status use_rank_device(int) { return no_cuda(); }

Expected<std::vector<actors::device_group_id>> lead_device_groups(const comm::Grid&, int, int) { return no_cuda(); }

Expected<std::unique_ptr<DeviceGroup>> DeviceGroup::join(const actors::start_msg&, const comm::Grid&, int,
                                                         compute::Backend&) {
  return no_cuda();
}

compute::DataParallel DeviceGroup::data_parallel(compute::DataParallel host, actors::MailboxComm&,
                                                 monitor::WorkProgress&) {
  return host;
}

#endif

DeviceGroup::DeviceGroup(std::unique_ptr<Members> members) : members_(std::move(members)) {}
DeviceGroup::~DeviceGroup() = default;

}  // namespace troupe::actors
