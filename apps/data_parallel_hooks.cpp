#include "apps/data_parallel_hooks.hpp"

#include <stdexcept>

namespace troupe::apps {

compute::DataParallel group_data_parallel(comm::Communicator& comm, comm::BucketSums& buckets, int rank, int world,
                                          int zero_stage, std::int64_t parameters) {
  auto check = [](const Status& s) {
    if (!s) throw std::runtime_error(s.error().message);
  };
  compute::DataParallel dp;
  dp.rank = rank;
  dp.size = world;
  dp.zero_stage = zero_stage;
  if (zero_stage > 0) {
    // The shard is the reduce-scatter's segment, so ZeRO-2's summed gradients land on it.
    const comm::Slice shard = comm::segment_of(parameters, world, comm.position());
    dp.shard_begin = shard.offset;
    dp.shard_end = shard.offset + shard.count;
  }
  dp.sum_gradients = [&comm, check](compute::Tensor& grads) { check(comm.all_reduce(grads)); };
  dp.start_sum = [&buckets](compute::Tensor bucket) { buckets.start(std::move(bucket)); };
  dp.wait_sums = [&buckets, check] { check(buckets.wait()); };
  dp.reduce_scatter_gradients = [&comm, check](compute::Tensor& grads) { check(comm.reduce_scatter(grads)); };
  dp.all_gather_parameters = [&comm, check](compute::Tensor& params) { check(comm.all_gather(params)); };
  dp.sum = [&comm, check](double x) {
    compute::Tensor t = compute::Tensor::zeros({1}, compute::DType::f64);
    t.data_as<double>()[0] = x;
    check(comm.all_reduce(t));
    return t.data_as<double>()[0];
  };
  dp.mean = [sum = dp.sum, world](double x) { return sum(x) / world; };
  return dp;
}

}  // namespace troupe::apps
