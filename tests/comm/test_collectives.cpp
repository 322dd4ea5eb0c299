// Reduce-scatter, all-gather, broadcast and barrier across real processes, with sizes that do
// not divide by the number of ranks (and sizes smaller than it).

#include "rank_support.hpp"

#include <future>
#include <thread>

using namespace troupe::comm;
using namespace troupe::comm::test;
using troupe::Error;
using troupe::Expected;
using troupe::compute::DType;
using troupe::compute::Tensor;

namespace {

const std::vector<std::int64_t> sizes{0, 1, 7, 1000003};
// Small chunks, so that even the mid-size buffers are many messages.
const CollectiveOptions chunked{16384, 3};

Error wrong(const char* what, std::int64_t count, std::int64_t i, double got, double want) {
  return Error{std::string(what) + ", count " + std::to_string(count) + ", element " + std::to_string(i) + ": got " +
               std::to_string(got) + ", want " + std::to_string(want)};
}

}  // namespace

TEST_CASE("reduce-scatter leaves each rank the sum of its own segment", "[collectives][reduce_scatter]") {
  for (int n = 1; n <= 4; ++n) {
    INFO(n << " processes");
    run_ranks(n, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
      auto comm = world(engine, chunked);
      if (!comm) return comm.error();
      const int n = engine.world_size();
      for (std::int64_t count : sizes) {
        Tensor buffer = Tensor::zeros({count}, DType::f64);
        double* x = buffer.data_as<double>();
        for (std::int64_t i = 0; i < count; ++i) x[i] = input_value(engine.rank(), i);
        if (auto s = (*comm)->reduce_scatter(buffer); !s) return s.error();
        const Slice own = segment_of(count, n, (*comm)->position());
        for (std::int64_t i = own.offset; i < own.offset + own.count; ++i) {
          double want = 0;
          for (int r = 0; r < n; ++r) want += input_value(r, i);
          if (std::abs(x[i] - want) > 1e-12 * n * 256) return wrong("reduce-scatter", count, i, x[i], want);
        }
      }
      return std::vector<std::uint8_t>{};
    });
  }
}

TEST_CASE("all-gather puts every rank's segment on every rank", "[collectives][all_gather]") {
  for (int n = 1; n <= 4; ++n) {
    INFO(n << " processes");
    run_ranks(n, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
      auto comm = world(engine, chunked);
      if (!comm) return comm.error();
      const int n = engine.world_size();
      for (std::int64_t count : sizes) {
        Tensor buffer = Tensor::zeros({count}, DType::f32);
        float* x = buffer.data_as<float>();
        for (std::int64_t i = 0; i < count; ++i) x[i] = -1.0f;  // not ours: must be overwritten
        const Slice own = segment_of(count, n, (*comm)->position());
        for (std::int64_t i = own.offset; i < own.offset + own.count; ++i) x[i] = input_value(engine.rank(), i);
        if (auto s = (*comm)->all_gather(buffer); !s) return s.error();
        for (int p = 0; p < n; ++p) {
          const Slice part = segment_of(count, n, p);
          for (std::int64_t i = part.offset; i < part.offset + part.count; ++i) {
            if (x[i] != input_value(p, i)) return wrong("all-gather", count, i, x[i], input_value(p, i));
          }
        }
      }
      return std::vector<std::uint8_t>{};
    });
  }
}

namespace {

// Position p's segment of `count` elements when the segments are uneven: some empty, the
// largest at a different position for each count (ZeRO-3 gathers a block's share of each shard).
std::vector<Slice> uneven_segments(std::int64_t count, int n) {
  std::vector<Slice> segments(n);
  std::int64_t next = 0;
  for (int p = 0; p < n; ++p) {
    const std::int64_t left = count - next;
    const std::int64_t take = p == n - 1 ? left : (p % 2 == 1 ? 0 : left * (p + 1) / (n + 1));
    segments[p] = {next, take};
    next += take;
  }
  return segments;
}

}  // namespace

TEST_CASE("reduce-scatter and all-gather over uneven segments, some of them empty", "[collectives][zero3]") {
  for (int n = 1; n <= 4; ++n) {
    INFO(n << " processes");
    run_ranks(n, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
      auto comm = world(engine, chunked);
      if (!comm) return comm.error();
      const int n = engine.world_size(), position = (*comm)->position();
      for (std::int64_t count : {std::int64_t{1}, std::int64_t{7}, std::int64_t{1000003}}) {
        const std::vector<Slice> segments = uneven_segments(count, n);
        Tensor sums = Tensor::zeros({count}, DType::f64);
        double* x = sums.data_as<double>();
        for (std::int64_t i = 0; i < count; ++i) x[i] = input_value(engine.rank(), i);
        if (auto s = (*comm)->reduce_scatter(sums, segments); !s) return s.error();
        const Slice own = segments[position];
        for (std::int64_t i = own.offset; i < own.offset + own.count; ++i) {
          double want = 0;
          for (int r = 0; r < n; ++r) want += input_value(r, i);
          if (std::abs(x[i] - want) > 1e-12 * n * 256) return wrong("uneven reduce-scatter", count, i, x[i], want);
        }
        Tensor gathered = Tensor::zeros({count}, DType::f32);
        float* y = gathered.data_as<float>();
        for (std::int64_t i = 0; i < count; ++i) y[i] = -1.0f;
        for (std::int64_t i = own.offset; i < own.offset + own.count; ++i) y[i] = input_value(engine.rank(), i);
        if (auto s = (*comm)->all_gather(gathered, segments); !s) return s.error();
        for (int p = 0; p < n; ++p) {
          for (std::int64_t i = segments[p].offset; i < segments[p].offset + segments[p].count; ++i) {
            if (y[i] != input_value(p, i)) return wrong("uneven all-gather", count, i, y[i], input_value(p, i));
          }
        }
      }
      // Segments that leave a gap, or miss the buffer's end, fail the operation with a reason.
      Tensor buffer = Tensor::zeros({10}, DType::f32);
      std::vector<Slice> gap(n, Slice{0, 0});
      gap.back() = {1, 9};
      const auto refused = (*comm)->all_gather(buffer, gap);
      if (refused) return Error{"segments with a gap were accepted"};
      if (refused.error().message.find("segments") == std::string::npos) return refused.error();
      return std::vector<std::uint8_t>{};
    });
  }
}

TEST_CASE("broadcast copies the root's buffer to every rank, from any root", "[collectives][broadcast]") {
  for (int n = 1; n <= 4; ++n) {
    INFO(n << " processes");
    run_ranks(n, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
      auto comm = world(engine, chunked);
      if (!comm) return comm.error();
      const int n = engine.world_size();
      for (int root : {0, n - 1}) {
        for (std::int64_t count : sizes) {
          Tensor buffer = Tensor::zeros({count}, DType::f32);
          float* x = buffer.data_as<float>();
          if ((*comm)->position() == root) {
            for (std::int64_t i = 0; i < count; ++i) x[i] = input_value(root, i);
          }
          if (auto s = (*comm)->broadcast(buffer, root); !s) return s.error();
          for (std::int64_t i = 0; i < count; ++i) {
            if (x[i] != input_value(root, i)) return wrong("broadcast", count, i, x[i], input_value(root, i));
          }
        }
      }
      return std::vector<std::uint8_t>{};
    });
  }
}

TEST_CASE("no rank leaves a barrier before the last one has entered it", "[collectives][barrier]") {
  for (int n = 1; n <= 4; ++n) {
    INFO(n << " processes");
    // Each rank reports when it entered and left (CLOCK_MONOTONIC, one clock for the host);
    // the last rank is late on purpose.
    const auto reports = run_ranks(n, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
      auto comm = world(engine);
      if (!comm) return comm.error();
      if (auto s = (*comm)->barrier(); !s) return s.error();
      if (engine.rank() == engine.world_size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const auto entered = std::chrono::steady_clock::now().time_since_epoch().count();
      if (auto s = (*comm)->barrier(); !s) return s.error();
      const auto left = std::chrono::steady_clock::now().time_since_epoch().count();
      return pack(std::vector<std::int64_t>{entered, left});
    });
    std::int64_t last_entry = 0;
    for (const auto& r : reports) last_entry = std::max(last_entry, unpack<std::int64_t>(r)[0]);
    for (const auto& r : reports) CHECK(unpack<std::int64_t>(r)[1] >= last_entry);
  }
}

TEST_CASE("collectives posted back to back stay apart and complete in any order", "[collectives]") {
  // With one mapped block per engine too: the operations queue for it.
  const char* blocks = GENERATE("4", "1");
  ScopedEnv env("TROUPE_COMM_MAPPED_BLOCKS", blocks);
  run_ranks(3, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    auto comm = world(engine, chunked);
    if (!comm) return comm.error();
    // Four operations in flight at once on one communicator: their messages must not mix.
    constexpr int ops = 4;
    std::vector<Tensor> buffers;
    std::vector<std::future<troupe::Status>> done;
    for (int k = 0; k < ops; ++k) {
      buffers.push_back(Tensor::zeros({100003}, DType::f32));
      for (std::int64_t i = 0; i < 100003; ++i) buffers[k].data_as<float>()[i] = static_cast<float>(k + engine.rank());
      auto promise = std::make_shared<std::promise<troupe::Status>>();
      done.push_back(promise->get_future());
      const auto callback = [promise](troupe::Status s) { promise->set_value(std::move(s)); };
      if (k % 2 == 0) {
        (*comm)->post_all_reduce(buffers[k], callback);
      } else {
        (*comm)->post_broadcast(buffers[k], k % 3, callback);
      }
    }
    for (int k = 0; k < ops; ++k) {
      if (auto s = done[k].get(); !s) return s.error();
      const float want = k % 2 == 0 ? static_cast<float>(3 * k + 3) : static_cast<float>(k + k % 3);
      for (std::int64_t i = 0; i < 100003; ++i) {
        if (buffers[k].data_as<float>()[i] != want)
          return wrong("operation", k, i, buffers[k].data_as<float>()[i], want);
      }
    }
    return std::vector<std::uint8_t>{};
  });
}
