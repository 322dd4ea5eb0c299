#include "actors/worker/data_parallel_hooks.hpp"

namespace troupe::actors {

compute::DataParallel group_data_parallel(MailboxComm& mailbox, comm::Communicator& comm,
                                          monitor::WorkProgress& progress, int zero_stage, std::int64_t parameters) {
  const int world = static_cast<int>(comm.group().ranks.size());
  compute::DataParallel dp;
  dp.rank = comm.position();
  dp.size = world;
  dp.zero_stage = zero_stage;
  if (zero_stage > 0) {
    // The shard is the reduce-scatter's segment, so ZeRO-2's summed gradients land on it.
    const comm::Slice shard = comm::segment_of(parameters, world, comm.position());
    dp.shard_begin = shard.offset;
    dp.shard_end = shard.offset + shard.count;
  }
  // Posts one operation and waits for it, saying what for.
  auto run = [&mailbox, &progress](const char* what, auto post) {
    post();
    auto waiting = progress.wait_for(what);
    check_comm(mailbox.wait_all());
  };
  dp.sum_gradients = [run, &mailbox, &comm](compute::Tensor& grads) {
    run("the gradient sum", [&] { mailbox.all_reduce(comm, grads); });
  };
  dp.start_sum = [&mailbox, &comm](compute::Tensor bucket) { mailbox.all_reduce(comm, std::move(bucket)); };
  dp.wait_sums = [&mailbox, &progress] {
    auto waiting = progress.wait_for("the gradient sums");
    check_comm(mailbox.wait_all());
  };
  dp.reduce_scatter_gradients = [run, &mailbox, &comm](compute::Tensor& grads) {
    run("the gradient reduce-scatter", [&] { mailbox.reduce_scatter(comm, grads); });
  };
  dp.all_gather_parameters = [run, &mailbox, &comm](compute::Tensor& params) {
    run("the parameter all-gather", [&] { mailbox.all_gather(comm, params); });
  };
  dp.sum = [run, &mailbox, &comm](double x) {
    compute::Tensor t = compute::Tensor::zeros({1}, compute::DType::f64);
    t.data_as<double>()[0] = x;
    run("a scalar sum", [&] { mailbox.all_reduce(comm, t); });
    return t.data_as<double>()[0];
  };
  dp.mean = [sum = dp.sum, world](double x) { return sum(x) / world; };
  return dp;
}

}  // namespace troupe::actors
