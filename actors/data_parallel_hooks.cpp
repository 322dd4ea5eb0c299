#include "actors/data_parallel_hooks.hpp"

#include <stdexcept>

namespace troupe::actors {
namespace {

void check(const Status& s) {
  if (!s) throw std::runtime_error(s.error().message);
}

}  // namespace

compute::DataParallel group_data_parallel(MailboxCollectives& collectives, monitor::WorkProgress& progress,
                                          int zero_stage, std::int64_t parameters) {
  comm::Communicator& comm = collectives.communicator();
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
  auto run = [&collectives, &progress](const char* what, auto post) {
    post();
    auto waiting = progress.wait_for(what);
    check(collectives.wait_all());
  };
  dp.sum_gradients = [run, &collectives](compute::Tensor& grads) {
    run("the gradient sum", [&] { collectives.all_reduce(grads); });
  };
  dp.start_sum = [&collectives](compute::Tensor bucket) { collectives.all_reduce(std::move(bucket)); };
  dp.wait_sums = [&collectives, &progress] {
    auto waiting = progress.wait_for("the gradient sums");
    check(collectives.wait_all());
  };
  dp.reduce_scatter_gradients = [run, &collectives](compute::Tensor& grads) {
    run("the gradient reduce-scatter", [&] { collectives.reduce_scatter(grads); });
  };
  dp.all_gather_parameters = [run, &collectives](compute::Tensor& params) {
    run("the parameter all-gather", [&] { collectives.all_gather(params); });
  };
  dp.sum = [run, &collectives](double x) {
    compute::Tensor t = compute::Tensor::zeros({1}, compute::DType::f64);
    t.data_as<double>()[0] = x;
    run("a scalar sum", [&] { collectives.all_reduce(t); });
    return t.data_as<double>()[0];
  };
  dp.mean = [sum = dp.sum, world](double x) { return sum(x) / world; };
  return dp;
}

}  // namespace troupe::actors
