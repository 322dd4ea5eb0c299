// Data parallelism on the GPU: the trainer's NCCL hooks (actors/cuda) on a world of one, a job
// whose node bootstraps its NCCL communicator from the id in the start message, and — on a
// machine with two devices — two workers over NCCL taking the steps of one process of twice the
// batch. Multi-device cases carry [multi-gpu]: gpu_main reports them skipped by name when the
// machine has fewer than two devices.

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "actors/actor_system_setup.hpp"
#include "actors/worker/cuda/device_data_parallel_hooks.hpp"
#include "apps/run_troupe.hpp"
#include "comm/nccl/nccl_comm.hpp"
#include "gpu/gpu_support.hpp"

namespace troupe::tests {
namespace {

using namespace std::chrono_literals;
using troupe::test::number_after;
using troupe::test::run_troupe;

const std::vector<std::string> tiny_cuda_job{"--model.preset", "tiny",          "--train.steps",   "6",
                                             "--train.val_batches", "1",        "--sample.tokens", "0",
                                             "--train.backend", "cuda"};

// `troupe train` with `extra`, or with a first word of "launch", `troupe launch`.
troupe::test::ProcessResult train(const troupe::test::TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> args{"train"};
  if (!extra.empty() && extra.front() == "launch") {
    args.front() = "launch";
    extra.erase(extra.begin());
  }
  args.insert(args.end(), tiny_cuda_job.begin(), tiny_cuda_job.end());
  args.insert(args.end(), extra.begin(), extra.end());
  auto result = run_troupe(dir, args, 180s);
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  return result;
}

}  // namespace

TEST_CASE("nccl data-parallel hooks on a world of one sum buckets after the compute that filled them", "[gpu]") {
  auto gpu = cuda_backend(compute::Precision::fp32);
  auto id = comm::NcclComm::make_id();
  REQUIRE(id.ok());
  auto nccl = comm::NcclComm::create(*id, 1, 0, gpu->stream(), 30s);
  REQUIRE(nccl.ok());
  actors::TroupeConfig cfg;
  caf::actor_system system{cfg};
  caf::scoped_actor self{system};
  actors::MailboxComm mailbox(self.ptr());
  monitor::WorkProgress progress;
  compute::DataParallel host;
  compute::DataParallel dp = actors::device_data_parallel(**nccl, host, mailbox, progress);

  const int n = 4096;
  compute::Tensor values = random_host({n}, 3);
  compute::Tensor grads = to_device(*gpu, values);
  // Scaled on the compute stream just before: the sums must see the scaled values.
  gpu->scale(grads, 3.0f);
  dp.start_sum(grads.slice(0, {1000}), 0);
  dp.start_sum(grads.slice(1000, {n - 1000}), 1000);
  dp.wait_sums();
  compute::Tensor expected = host_copy(values);
  compute::CpuBackend cpu(1);
  cpu.scale(expected, 3.0f);
  require_close(*gpu, grads, expected, 0.0, "bucketed sums over one rank");
}

TEST_CASE("a one-worker job on the gpu bootstraps nccl from the start message and equals the in-process run",
          "[gpu]") {
  troupe::test::TempDir dir;
  const auto alone = train(dir, {});
  // `troupe train --workers 1` trains in-process; a host file of one line starts a node process.
  {
    std::ofstream hosts(dir.path() / "hosts");
    hosts << "localhost slots=1\n";
  }
  const auto job = train(dir, {"launch", "--hostfile", (dir.path() / "hosts").string()});
  CHECK_THAT(job.out, Catch::Contains("gradients summed by NCCL over group 1 [0]"));
  // The token-embedding gradient is summed with atomics on the device, so runs may differ in
  // the last bits.
  CHECK(number_after(job.out, "final train loss") == Approx(number_after(alone.out, "final train loss")).epsilon(1e-4));
  CHECK(number_after(job.out, "param norm") == Approx(number_after(alone.out, "param norm")).epsilon(1e-5));
}

TEST_CASE("two gpu workers of batch b over nccl take the steps of one process of batch 2b", "[gpu][multi-gpu]") {
  troupe::test::TempDir dir;
  const auto one = train(dir, {"--train.batch_size", "16"});
  const auto two = train(dir, {"--train.batch_size", "8", "--workers", "2"});
  CHECK_THAT(two.out, Catch::Contains("gradients summed by NCCL over group 1 [0 1]"));
  CHECK(number_after(two.out, "final train loss") == Approx(number_after(one.out, "final train loss")).epsilon(1e-4));
  CHECK(number_after(two.out, "param norm") == Approx(number_after(one.out, "param norm")).epsilon(1e-5));
}

}  // namespace troupe::tests
