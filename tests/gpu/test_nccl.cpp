// NCCL with a world of one: the whole code path (id, non-blocking init, event ordering after the
// compute stream, collectives, grouped send/recv, wait, abort) on one GPU. Multi-GPU DP and PP
// equality needs a machine with several GPUs and is not here yet (docs/gpu.md).

#include <catch2/catch.hpp>

#include <chrono>

#include "comm/nccl/nccl_comm.hpp"
#include "gpu/gpu_support.hpp"

namespace troupe::tests {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<comm::NcclComm> world_of_one(compute::CudaBackend& gpu) {
  auto id = comm::NcclComm::make_id();
  REQUIRE(id.ok());
  auto nccl = comm::NcclComm::create(*id, 1, 0, gpu.stream(), 30s);
  REQUIRE(nccl.ok());
  return std::move(*nccl);
}

}  // namespace

TEST_CASE("nccl world of one: collectives and send/recv after compute, in order", "[gpu]") {
  auto gpu = cuda_backend(compute::Precision::fp32);
  auto nccl = world_of_one(*gpu);
  const int n = 1000;
  compute::Tensor host = random_host({n}, 1);
  compute::Tensor data = to_device(*gpu, host), out = poisoned(*gpu, {n});
  // Enqueued on the compute stream just before: the all-reduce must see the scaled values.
  gpu->scale(data, 2.0f);
  REQUIRE(nccl->all_reduce_sum(data.data_as<float>(), n).ok());
  REQUIRE(nccl->reduce_scatter_sum(out.data_as<float>(), data.data_as<float>(), n).ok());
  REQUIRE(nccl->compute_waits().ok());
  compute::Tensor expected = host_copy(host);
  compute::CpuBackend cpu(1);
  cpu.scale(expected, 2.0f);
  require_close(*gpu, out, expected, 0.0, "reduce-scatter of one");

  compute::Tensor gathered = poisoned(*gpu, {n}), received = poisoned(*gpu, {n});
  REQUIRE(nccl->all_gather(gathered.data_as<float>(), out.data_as<float>(), n).ok());
  REQUIRE(nccl->exchange(gathered.data_as<float>(), n, 0, received.data_as<float>(), n, 0).ok());
  REQUIRE(nccl->wait(30s).ok());
  require_close(*gpu, received, expected, 0.0, "all-gather then send/recv to self");
}

TEST_CASE("nccl abort leaves every later call an error", "[gpu]") {
  auto gpu = cuda_backend(compute::Precision::fp32);
  auto nccl = world_of_one(*gpu);
  nccl->abort();
  REQUIRE(nccl->aborted());
  compute::Tensor data = gpu->zeros({8}, compute::DType::f32);
  const Status s = nccl->all_reduce_sum(data.data_as<float>(), 8);
  REQUIRE_FALSE(s.ok());
  REQUIRE_THAT(s.error().message, Catch::Contains("aborted"));
}

}  // namespace troupe::tests
