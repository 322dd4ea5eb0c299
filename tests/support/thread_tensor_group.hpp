#pragma once
// T threads standing for the T shards of a tensor group: their sums and gathers go through shared
// memory, each sum adding the shards in order 0..T-1, so every shard gets the same values.

#include <barrier>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/model/tensor_shard.hpp"
#include "compute/tensor.hpp"

namespace troupe::test {

class ThreadGroup {
 public:
  explicit ThreadGroup(int shards) : shards_(shards), sync_(shards), published_(shards) {}

  compute::TensorShardGroup member(int index) {
    compute::TensorShardGroup g;
    g.shard = {index, shards_};
    g.all_reduce = [this, index](compute::Tensor t) { all_reduce(index, t); };
    g.all_gather = [this, index](compute::Tensor t) { all_gather(index, t); };
    g.reduce_scatter = [this, index](compute::Tensor t) { reduce_scatter(index, t); };
    return g;
  }

 private:
  void all_reduce(int index, const compute::Tensor& t) {
    published_[index] = t;
    sync_.arrive_and_wait();
    compute::Tensor sum = compute::Tensor::zeros(t.shape(), t.dtype());
    for (int s = 0; s < shards_; ++s) {
      if (t.dtype() == compute::DType::f32)
        add<float>(sum, published_[s]);
      else
        add<double>(sum, published_[s]);
    }
    sync_.arrive_and_wait();
    std::memcpy(t.data(), sum.data(), t.nbytes());
    sync_.arrive_and_wait();
  }

  // The sum of every segment, as all_reduce adds; only this shard's segment is kept.
  void reduce_scatter(int index, const compute::Tensor& t) {
    compute::Tensor copy = compute::Tensor::zeros(t.shape(), t.dtype());
    std::memcpy(copy.data(), t.data(), t.nbytes());
    all_reduce(index, copy);
    const std::size_t segment = t.nbytes() / static_cast<std::size_t>(shards_);
    std::memcpy(static_cast<char*>(t.data()) + index * segment, static_cast<const char*>(copy.data()) + index * segment,
                segment);
  }

  void all_gather(int index, const compute::Tensor& t) {
    published_[index] = t;
    sync_.arrive_and_wait();
    const std::size_t segment = t.nbytes() / static_cast<std::size_t>(shards_);
    for (int s = 0; s < shards_; ++s)
      if (s != index)
        std::memcpy(static_cast<char*>(t.data()) + s * segment,
                    static_cast<const char*>(published_[s].data()) + s * segment, segment);
    sync_.arrive_and_wait();
  }

  template <typename Real>
  static void add(compute::Tensor& sum, const compute::Tensor& part) {
    for (std::int64_t i = 0; i < sum.numel(); ++i) sum.data_as<Real>()[i] += part.data_as<Real>()[i];
  }

  int shards_;
  std::barrier<> sync_;
  std::vector<compute::Tensor> published_;
};

// `run(backend, member)` on `shards` threads, each a shard of one ThreadGroup (sequence parallel
// where asked) with a one-thread CPU backend of its own: their results, in shard order.
template <class Run>
auto on_tensor_shards(int shards, bool sequence_parallel, Run run) {
  using Result = std::invoke_result_t<Run&, compute::CpuBackend&, compute::TensorShardGroup&>;
  ThreadGroup group(shards);
  std::vector<Result> results(static_cast<std::size_t>(shards));
  std::vector<std::thread> threads;
  for (int s = 0; s < shards; ++s)
    threads.emplace_back([&, s] {
      compute::CpuBackend backend(1);
      compute::TensorShardGroup member = group.member(s);
      member.sequence_parallel = sequence_parallel;
      results[static_cast<std::size_t>(s)] = run(backend, member);
    });
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace troupe::test
