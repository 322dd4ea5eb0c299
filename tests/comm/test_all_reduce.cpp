// All-reduce across real processes (forked, shared memory through UCX): equal to a reference
// sum computed in double, the same bits on every rank, the same bits on every run.

#include "rank_support.hpp"

#include <algorithm>

using namespace troupe::comm;
using namespace troupe::comm::test;
using troupe::Error;
using troupe::Expected;
using troupe::compute::DType;
using troupe::compute::Tensor;

namespace {

// All-reduces rank inputs of each size, checks every element against the double reference
// within the float error bound of an n-term sum, and reports a hash of the result per size.
template <typename T>
LocalRankBody check_sums(std::vector<std::int64_t> sizes, CollectiveOptions options) {
  return [sizes, options](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    auto comm = world(engine, options);
    if (!comm) return comm.error();
    const int n = engine.world_size();
    const DType dtype = sizeof(T) == 4 ? DType::f32 : DType::f64;
    const double epsilon = sizeof(T) == 4 ? 0x1p-23 : 0x1p-52;
    std::vector<std::uint64_t> hashes;
    for (std::int64_t count : sizes) {
      Tensor buffer = Tensor::zeros({count}, dtype);
      T* x = buffer.data_as<T>();
      for (std::int64_t i = 0; i < count; ++i) x[i] = static_cast<T>(input_value(engine.rank(), i));
      if (auto s = (*comm)->all_reduce(buffer); !s) return s.error();
      for (std::int64_t i = 0; i < count; ++i) {
        double sum = 0, magnitude = 0;
        for (int r = 0; r < n; ++r) {
          const double v = input_value(r, i);
          sum += v;
          magnitude += std::abs(v);
        }
        if (std::abs(x[i] - sum) > n * epsilon * magnitude) {
          return Error{"count " + std::to_string(count) + ", element " + std::to_string(i) + ": got " +
                       std::to_string(x[i]) + ", want " + std::to_string(sum)};
        }
      }
      hashes.push_back(hash_bytes(x, buffer.nbytes()));
    }
    return pack(hashes);
  };
}

void require_same_on_every_rank(const std::vector<std::vector<std::uint8_t>>& reports) {
  for (const auto& report : reports) CHECK(report == reports.front());
}

}  // namespace

TEST_CASE("all-reduce of f32 equals the reference sum, identical on every rank, 1 to 4 processes",
          "[collectives][all_reduce]") {
  const std::vector<std::int64_t> sizes{0, 1, 7, 1000003};
  for (int n = 1; n <= 4; ++n) {
    INFO(n << " processes");
    const auto first = run_ranks(n, check_sums<float>(sizes, CollectiveOptions::from_environment()));
    require_same_on_every_rank(first);
    // A second run, new processes: the same bits.
    CHECK(run_ranks(n, check_sums<float>(sizes, CollectiveOptions::from_environment())).front() == first.front());
  }
}

TEST_CASE("all-reduce of f64 equals the reference sum", "[collectives][all_reduce]") {
  require_same_on_every_rank(
      run_ranks(3, check_sums<double>({0, 1, 7, 1000003}, CollectiveOptions::from_environment())));
}

TEST_CASE("all-reduce with many small chunks and a narrow window gives the same bits as with large chunks",
          "[collectives][all_reduce]") {
  // 4 KiB chunks: about 250 chunks per segment walk the ring through a window of 2 slots.
  const auto small = run_ranks(3, check_sums<float>({7, 1000003}, CollectiveOptions{4096, 2}));
  const auto large = run_ranks(3, check_sums<float>({7, 1000003}, CollectiveOptions{1 << 22, 8}));
  require_same_on_every_rank(small);
  CHECK(small.front() == large.front());
}

TEST_CASE("all-reduce by recursive doubling equals the reference sum, identical on every rank, 1 to 8 processes",
          "[collectives][all_reduce]") {
  // 3, 5, 6 and 7 fold their last ranks in and out; the sizes cover empty, one and odd counts.
  CollectiveOptions doubling = CollectiveOptions::from_environment();
  doubling.all_reduce = AllReduceAlgorithm::recursive_doubling;
  const std::vector<std::int64_t> sizes{0, 1, 7, 100003};
  for (int n = 1; n <= 8; ++n) {
    INFO(n << " processes");
    const auto first = run_ranks(n, check_sums<float>(sizes, doubling));
    require_same_on_every_rank(first);
    if (n == 5) CHECK(run_ranks(n, check_sums<float>(sizes, doubling)).front() == first.front());
  }
  require_same_on_every_rank(run_ranks(6, check_sums<double>(sizes, doubling)));
  // Two ranks add the same two buffers either way: the ring's bits.
  CollectiveOptions ring = doubling;
  ring.all_reduce = AllReduceAlgorithm::ring;
  CHECK(run_ranks(2, check_sums<float>(sizes, doubling)).front() == run_ranks(2, check_sums<float>(sizes, ring)).front());
}

TEST_CASE("the all-reduce's algorithm: the ring below 32 ranks, doubling where many ranks make the ring's hops the sum",
          "[collectives][all_reduce]") {
  for (int n : {2, 8, 31}) CHECK(all_reduce_algorithm(n, 4) == AllReduceAlgorithm::ring);
  // A loss (4 bytes) and tiny's gradients (3.4 MB) over 1,024 ranks: 10 hops against 2,046.
  CHECK(all_reduce_algorithm(1024, 4) == AllReduceAlgorithm::recursive_doubling);
  CHECK(all_reduce_algorithm(1024, 3400000) == AllReduceAlgorithm::recursive_doubling);
  CHECK(all_reduce_algorithm(100, 4) == AllReduceAlgorithm::recursive_doubling);
  // Over 64 ranks the whole 3.4 MB six times costs more than the ring's 126 small hops.
  CHECK(all_reduce_algorithm(64, 3400000) == AllReduceAlgorithm::ring);
  CHECK(all_reduce_algorithm(64, 88000) == AllReduceAlgorithm::recursive_doubling);
  // Large buffers stay on the bandwidth-optimal ring at any size.
  CHECK(all_reduce_algorithm(4096, std::size_t{1} << 30) == AllReduceAlgorithm::ring);
}

TEST_CASE("all-reduce of 64 MiB of f32 on 2 and 4 processes, twice the same bits", "[collectives][all_reduce]") {
  const std::int64_t count = (64 << 20) / 4;
  for (int n : {2, 4}) {
    INFO(n << " processes");
    const auto first =
        run_ranks(n, check_sums<float>({count}, CollectiveOptions::from_environment()), std::chrono::seconds(60));
    require_same_on_every_rank(first);
    CHECK(run_ranks(n, check_sums<float>({count}, CollectiveOptions::from_environment()), std::chrono::seconds(60))
              .front() == first.front());
  }
}

TEST_CASE("all-reduce through mapped blocks gives the same bits as through messages, with one block or many",
          "[collectives][all_reduce]") {
  const std::vector<std::int64_t> sizes{7, 1000003, 5 << 20};
  const auto mapped = run_ranks(3, check_sums<float>(sizes, CollectiveOptions::from_environment()));
  require_same_on_every_rank(mapped);
  std::vector<std::uint8_t> messages;
  {
    ScopedEnv off("TROUPE_COMM_MAPPED_BLOCKS", "0");
    messages = run_ranks(3, check_sums<float>(sizes, CollectiveOptions::from_environment())).front();
  }
  CHECK(messages == mapped.front());
  // One block per engine: every chunk waits for the neighbour to have read the one before.
  ScopedEnv one("TROUPE_COMM_MAPPED_BLOCKS", "1");
  CHECK(run_ranks(3, check_sums<float>(sizes, CollectiveOptions::from_environment())).front() == mapped.front());
}

TEST_CASE("all-reduce over TCP, as between hosts, gives the same bits as over shared memory",
          "[collectives][all_reduce][tcp]") {
  const auto shared_memory = run_ranks(3, check_sums<float>({7, 1000003}, CollectiveOptions::from_environment()));
  ScopedEnv tcp("UCX_TLS", "tcp,self");
  const auto over_tcp = run_ranks(3, check_sums<float>({7, 1000003}, CollectiveOptions::from_environment()));
  require_same_on_every_rank(over_tcp);
  CHECK(over_tcp.front() == shared_memory.front());
}

TEST_CASE("collectives reject what they cannot do, through the callback", "[collectives]") {
  run_ranks(2, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    auto comm = world(engine);
    if (!comm) return comm.error();
    const auto ints = (*comm)->all_reduce(Tensor::zeros({4}, DType::i32));
    if (ints.ok() || ints.error().message.find("only f32, f64 and bf16") == std::string::npos) {
      return Error{"an i32 all-reduce was not refused"};
    }
    const auto root = (*comm)->broadcast(Tensor::zeros({4}, DType::f32), 5);
    if (root.ok() || root.error().message.find("root position 5") == std::string::npos) {
      return Error{"a broadcast from outside the group was not refused"};
    }
    // Refused operations take no sequence number: the next collective still matches.
    Tensor one = Tensor::zeros({1}, DType::f32);
    one.data_as<float>()[0] = 1.0f;
    if (auto s = (*comm)->all_reduce(one); !s) return s.error();
    if (one.data_as<float>()[0] != 2.0f) return Error{"the all-reduce after a refusal is wrong"};
    return std::vector<std::uint8_t>{};
  });
  run_ranks(1, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    if (Communicator::create(engine, Group{0, {1}}).ok()) return Error{"a group without this rank was accepted"};
    if (Communicator::create(engine, Group{0, {0, 0}}).ok()) return Error{"a rank twice was accepted"};
    if (Communicator::create(engine, Group{0, {0, 3}}).ok()) return Error{"a rank outside the world was accepted"};
    if (Communicator::create(engine, Group{5000, {0}}).ok()) return Error{"a group id beyond the tag was accepted"};
    return std::vector<std::uint8_t>{};
  });
}
