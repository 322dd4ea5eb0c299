// Context attention against one process: the rows each rank of a context group gets from ring
// attention and from the head all-to-all equal the same rows of the ordinary causal attention over
// the whole sequence, forward and backward, in float64 (1e-12 relative) and float32 (1e-6), for
// C = 2 and 4. The C ranks are threads of one process (LocalContextGroup), exchanging the same
// blocks, in the same order, as ranks in different processes do.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "compute/context/context_attention.hpp"
#include "compute/context/context_split.hpp"
#include "compute/context/local_exchange.hpp"
#include "compute/cpu/cpu_kernels.hpp"

using namespace troupe::compute;
using namespace troupe::compute::context;

namespace {

struct Case {
  int B, T, channels, heads, shards;
  ContextMethod method;
};

std::string name_of(const Case& c) {
  return std::string(c.method == ContextMethod::ring ? "ring" : "all_to_all") + " B=" + std::to_string(c.B) +
         " T=" + std::to_string(c.T) + " C=" + std::to_string(c.channels) + " NH=" + std::to_string(c.heads) +
         " shards=" + std::to_string(c.shards);
}

template <typename Real>
std::vector<Real> random_values(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<Real> v(n);
  for (Real& x : v) x = static_cast<Real>(dist(rng));
  return v;
}

// max |a - b| / max |b|.
template <typename Real>
double relative_error(const std::vector<Real>& a, const std::vector<Real>& b) {
  double diff = 0, size = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    size = std::max(size, std::abs(static_cast<double>(b[i])));
  }
  return diff / size;
}

struct Result {
  double out_error = 0, dqkv_error = 0;
};

// Runs one forward and backward of context attention over c.shards threads; the errors of the
// gathered out and dqkv against one process's attention.
template <typename Real>
Result run_against_one_process(const Case& c) {
  std::mt19937 rng(42);
  const int C = c.channels;
  const std::vector<Real> qkv = random_values<Real>(static_cast<std::size_t>(c.B) * c.T * 3 * C, rng);
  const std::vector<Real> dout = random_values<Real>(static_cast<std::size_t>(c.B) * c.T * C, rng);
  std::vector<Real> out(dout.size()), lse(static_cast<std::size_t>(c.B) * c.heads * c.T);
  std::vector<Real> dqkv(qkv.size()), row_dots(lse.size());
  cpu::attention_forward(out.data(), lse.data(), qkv.data(), c.T, C, c.heads, 0, c.B * c.heads);
  cpu::attention_backward(dqkv.data(), row_dots.data(), dout.data(), qkv.data(), lse.data(), c.T, C, c.heads, 0,
                          c.B * c.heads);

  const ContextSplit split = make_context_split(c.T, c.shards).value();
  const ContextShape shape{c.B, C, c.heads, split};
  LocalContextGroup group(c.shards);
  std::vector<Real> got_out(out.size()), got_dqkv(dqkv.size());
  std::vector<std::string> failures(c.shards);
  std::vector<std::thread> ranks;
  for (int r = 0; r < c.shards; ++r) {
    ranks.emplace_back([&, r] {
      auto attention = make_context_attention<Real>(c.method, shape, group.rank(r));
      if (!attention) {
        failures[r] = attention.error().message;
        return;
      }
      const std::size_t rows = static_cast<std::size_t>(c.B) * split.local_rows();
      std::vector<Real> q(rows * 3 * C), d(rows * C), o(rows * C), dq(rows * 3 * C);
      take_rows(q.data(), qkv.data(), c.B, 3 * C, split, r);
      take_rows(d.data(), dout.data(), c.B, C, split, r);
      if (auto st = (*attention)->forward(o.data(), q.data()); !st) failures[r] = st.error().message;
      if (auto st = (*attention)->backward(dq.data(), d.data(), q.data()); !st) failures[r] = st.error().message;
      put_rows(got_out.data(), o.data(), c.B, C, split, r);
      put_rows(got_dqkv.data(), dq.data(), c.B, 3 * C, split, r);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const std::string& f : failures) REQUIRE(f.empty());
  return {relative_error(got_out, out), relative_error(got_dqkv, dqkv)};
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (ContextMethod method : {ContextMethod::ring, ContextMethod::all_to_all}) {
    for (int shards : {2, 4}) {
      all.push_back({2, 32, 16, 4, shards, method});   // chunks of 8 and 4 rows
      all.push_back({1, 512, 32, 4, shards, method});  // chunks of 128 and 64: several query blocks each
    }
  }
  return all;
}

}  // namespace

TEST_CASE("context attention: the split gives rank r chunks r and 2C-1-r of 2C", "[context]") {
  const ContextSplit split = make_context_split(16, 4).value();
  std::vector<int> positions;
  for (int r = 0; r < 4; ++r) {
    for (int row = 0; row < split.local_rows(); ++row) positions.push_back(split.position(r, row));
  }
  CHECK(positions == std::vector<int>{0, 1, 14, 15, 2, 3, 12, 13, 4, 5, 10, 11, 6, 7, 8, 9});
  const std::vector<double> global{0, 1, 2, 3, 4, 5, 6, 7};  // B = 1, T = 8, width 1, C = 2
  const ContextSplit two = make_context_split(8, 2).value();
  std::vector<double> local(4);
  take_rows(local.data(), global.data(), 1, 1, two, 1);
  CHECK(local == std::vector<double>{2, 3, 4, 5});
}

TEST_CASE("context attention: a length not divisible by 2C is refused by name", "[context]") {
  const auto split = make_context_split(12, 4);
  REQUIRE_FALSE(split.ok());
  CHECK(split.error().message == "a sequence of 12 positions does not split into 2 x context.shards = 8 equal chunks");
}

TEST_CASE("context attention: all_to_all refuses a group size that does not divide the heads", "[context]") {
  LocalContextGroup group(4);
  const ContextShape shape{1, 24, 6, make_context_split(16, 4).value()};
  const auto attention = make_context_attention<double>(ContextMethod::all_to_all, shape, group.rank(0));
  REQUIRE_FALSE(attention.ok());
  CHECK(attention.error().message == "context.method = all_to_all needs context.shards = 4 to divide model.n_head = 6");
}

TEST_CASE("context attention: ring and all_to_all equal one process in float64", "[context]") {
  for (const Case& c : cases()) {
    INFO(name_of(c));
    const Result r = run_against_one_process<double>(c);
    CHECK(r.out_error < 1e-12);
    CHECK(r.dqkv_error < 1e-12);
  }
}

TEST_CASE("context attention: ring and all_to_all equal one process in float32", "[context]") {
  for (const Case& c : cases()) {
    INFO(name_of(c));
    const Result r = run_against_one_process<float>(c);
    CHECK(r.out_error < 1e-6);
    CHECK(r.dqkv_error < 1e-6);
  }
}
