#include "actors/worker/cuda/device_data_parallel_hooks.hpp"

namespace troupe::actors {
namespace {

// How long a wait for the device listens to the mailbox between looks at the stream: short,
// because it is added to the step whenever the sums finish in between.
constexpr std::chrono::microseconds device_poll_slice{100};

float* device_floats(const compute::Tensor& t) {
  TROUPE_CHECK(t.device() == compute::Device::cuda && t.dtype() == compute::DType::f32,
               "NCCL gradient sums take f32 device tensors, got " + t.describe());
  return t.data_as<float>();
}

// Until the communication enqueued so far has finished; then later compute is ordered after it.
void wait_for_device(comm::NcclComm& nccl, MailboxComm& mailbox) {
  for (;;) {
    auto done = nccl.finished();
    check_comm(done);
    if (*done) break;
    try {
      mailbox.take_orders(device_poll_slice);
    } catch (...) {
      nccl.abort();  // the peers may never come: nothing may wait on this communicator again
      throw;
    }
  }
  check_comm(nccl.compute_waits());
}

}  // namespace

compute::DataParallel device_data_parallel(comm::NcclComm& nccl, compute::DataParallel host, MailboxComm& mailbox,
                                           monitor::WorkProgress& progress) {
  TROUPE_CHECK(!compute::shards_optimizer_state(host.zero_stage),
               "ZeRO stage " + std::to_string(compute::zero_number(host.zero_stage)) + " over NCCL");
  TROUPE_CHECK(host.size == nccl.size() && host.rank == nccl.rank(), "the NCCL communicator is not the host group's");
  compute::DataParallel dp = std::move(host);
  dp.start_sum = [&nccl](compute::Tensor bucket, std::int64_t) {
    check_comm(nccl.all_reduce_sum(device_floats(bucket), static_cast<std::size_t>(bucket.numel())));
  };
  dp.wait_sums = [&nccl, &mailbox, &progress] {
    auto waiting = progress.wait_for("the gradient sums (NCCL)");
    wait_for_device(nccl, mailbox);
  };
  return dp;
}

}  // namespace troupe::actors
