// Expert parallelism at the compute level (compute/moe/expert_exchange.hpp): an expert group of EP
// threads (compute/context/local_exchange.hpp), each with its own tokens, against one process
// running every rank's tokens through all the experts, in float64. Every rank's output, input
// gradient, routing losses, router and shared-expert gradients equal the one-process run of its
// tokens; every rank holds its E/EP experts alone, whose gradients equal the one-process gradient
// summed over all ranks' tokens; every slot reaches an expert and comes back.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "compute/context/local_exchange.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/moe/moe_layer.hpp"

using namespace troupe::compute;

namespace {

constexpr std::int64_t N = 8, C = 4, H = 8;
constexpr int E = 4, K = 2;
constexpr double aux_scale = 0.7, z_scale = 0.3, tolerance = 1e-12;

Tensor random_tensor(Shape shape, std::mt19937& rng, double scale) {
  Tensor t = Tensor::zeros(std::move(shape), DType::f64);
  std::normal_distribution<double> dist(0.0, scale);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data_as<double>()[i] = dist(rng);
  return t;
}

MoEWeights random_weights(std::mt19937& rng) {
  return {random_tensor({E, C}, rng, 0.8),    random_tensor({E, H, C}, rng, 0.5), random_tensor({E, H}, rng, 0.3),
          random_tensor({E, C, H}, rng, 0.5), random_tensor({E, C}, rng, 0.3),    random_tensor({H, C}, rng, 0.5),
          random_tensor({H}, rng, 0.3),       random_tensor({C, H}, rng, 0.5),    random_tensor({C}, rng, 0.3)};
}

MoEWeights zeros_like(const MoEWeights& w) {
  auto z = [](const Tensor& t) { return Tensor::zeros(t.shape(), t.dtype()); };
  return {z(w.router),      z(w.fc_w),        z(w.fc_b),          z(w.proj_w),       z(w.proj_b),
          z(w.shared_fc_w), z(w.shared_fc_b), z(w.shared_proj_w), z(w.shared_proj_b)};
}

std::vector<Tensor*> all_of(MoEWeights& w) {
  return {&w.router,      &w.fc_w,        &w.fc_b,          &w.proj_w,       &w.proj_b,
          &w.shared_fc_w, &w.shared_fc_b, &w.shared_proj_w, &w.shared_proj_b};
}

MoEAllocate allocator() {
  return [](std::int64_t numel) { return Tensor::zeros({numel}, DType::f64); };
}

// Rank `rank` of `shards`'s weights: the router and the shared expert whole, its experts' slices of
// the stacked tensors (views into `w`).
MoEWeights held_by(const MoEWeights& w, int rank, int shards) {
  MoEWeights mine = w;
  for (Tensor* t : {&mine.fc_w, &mine.fc_b, &mine.proj_w, &mine.proj_b}) {
    Shape shape = t->shape();
    shape[0] /= shards;
    *t = t->slice(rank * shape_numel(shape), shape);
  }
  return mine;
}

// One rank's step: its tokens' output, input gradient, losses and parameter gradients.
struct Step {
  Tensor out, dinp;
  MoEWeights grads;
  double aux = 0, z = 0;
  std::int64_t sent = 0, received = 0;
  std::vector<std::int64_t> routed;  // slots per expert on this rank's tokens
};

Step step(int shards, const ExpertGroup& group, const Tensor& x, const Tensor& dout, const MoEWeights& whole) {
  CpuBackend backend(1);
  const MoEShape shape{E, K, true, C, H, shards};
  MoEActivations a = make_moe_activations(shape, N, allocator());
  MoEScratch scratch = make_moe_scratch(shape, N, allocator());
  const MoEWeights w = held_by(whole, group.rank(), shards);
  Step s{Tensor::zeros({N, C}, DType::f64), Tensor::zeros({N, C}, DType::f64), zeros_like(w)};
  moe_forward(backend, s.out, a, x, w, K, group);
  moe_backward(backend, s.dinp, s.grads, scratch, dout, a, x, w, aux_scale, z_scale, group);
  s.aux = a.plan.aux_loss;
  s.z = a.plan.z_loss;
  for (int e = 0; e < E; ++e) s.routed.push_back(a.plan.count(e));
  if (group.sharded()) {
    s.sent = std::accumulate(a.counts.sent.begin(), a.counts.sent.end(), std::int64_t{0});
    s.received = a.counts.received_rows();
  }
  return s;
}

// Every rank's step on threads of one expert group.
std::vector<Step> expert_parallel(int shards, const std::vector<Tensor>& x, const std::vector<Tensor>& dout,
                                  const MoEWeights& w) {
  context::LocalContextGroup group(shards);
  std::vector<Step> steps(static_cast<std::size_t>(shards));
  std::vector<std::exception_ptr> failed(static_cast<std::size_t>(shards));
  std::vector<std::thread> threads;
  for (int r = 0; r < shards; ++r) {
    threads.emplace_back([&, r] {
      try {
        steps[r] = step(shards, ExpertGroup{&group.rank(r)}, x[r], dout[r], w);
      } catch (...) {
        failed[r] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& f : failed)
    if (f) std::rethrow_exception(f);
  return steps;
}

// The largest relative difference of `a` from b's elements [from, from + a.numel()).
double worst(const Tensor& a, const Tensor& b, std::int64_t from = 0) {
  double d = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double want = b.data_as<double>()[from + i];
    d = std::max(d, std::abs(a.data_as<double>()[i] - want) / std::max(1.0, std::abs(want)));
  }
  return d;
}

double largest(const Tensor& a, std::int64_t begin, std::int64_t end) {
  double m = 0;
  for (std::int64_t i = begin; i < end; ++i) m = std::max(m, std::abs(a.data_as<double>()[i]));
  return m;
}

void check_against_one_process(int shards, const std::vector<Tensor>& x, const std::vector<Tensor>& dout,
                               const MoEWeights& w) {
  std::vector<Step> one;
  MoEWeights summed = zeros_like(w);
  for (int r = 0; r < shards; ++r) {
    one.push_back(step(1, ExpertGroup{}, x[r], dout[r], w));
    std::vector<Tensor*> into = all_of(summed), from = all_of(one.back().grads);
    for (std::size_t i = 0; i < into.size(); ++i)
      for (std::int64_t j = 0; j < into[i]->numel(); ++j)
        into[i]->data_as<double>()[j] += from[i]->data_as<double>()[j];
  }
  std::vector<Step> ep = expert_parallel(shards, x, dout, w);
  std::int64_t slots = 0, received = 0;
  std::vector<std::int64_t> routed(E, 0);
  for (int r = 0; r < shards; ++r) {
    INFO("EP " << shards << ", rank " << r);
    Step& s = ep[r];
    CHECK(worst(s.out, one[r].out) <= tolerance);
    CHECK(worst(s.dinp, one[r].dinp) <= tolerance);
    CHECK(std::abs(s.aux - one[r].aux) <= tolerance);
    CHECK(std::abs(s.z - one[r].z) <= tolerance);
    // Replicated: the router's and the shared expert's gradients are the rank's own tokens'.
    const std::vector<Tensor*> got = all_of(s.grads), alone = all_of(one[r].grads);
    for (std::size_t i : {0, 5, 6, 7, 8}) CHECK(worst(*got[i], *alone[i]) <= tolerance);
    // The experts: the rank holds its E/EP, whose gradients are the whole group's tokens'.
    const std::vector<Tensor*> mine = {&s.grads.fc_w, &s.grads.fc_b, &s.grads.proj_w, &s.grads.proj_b},
                               want = {&summed.fc_w, &summed.fc_b, &summed.proj_w, &summed.proj_b};
    for (std::size_t i = 0; i < mine.size(); ++i) {
      REQUIRE(mine[i]->dim(0) == E / shards);
      CHECK(worst(*mine[i], *want[i], r * mine[i]->numel()) <= tolerance);
    }
    CHECK(s.sent == N * K);
    slots += s.sent;
    received += s.received;
    for (int e = 0; e < E; ++e) routed[e] += s.routed[e];
  }
  // Every slot reached a rank holding its expert, once.
  CHECK(received == slots);
  CHECK(std::accumulate(routed.begin(), routed.end(), std::int64_t{0}) == shards * N * K);
}

}  // namespace

TEST_CASE("expert parallelism: one step on EP 2 and 4 equals one process, every gradient slice within 1e-12", "[moe]") {
  std::mt19937 rng(43);
  const MoEWeights w = random_weights(rng);
  for (int shards : {2, 4}) {
    std::vector<Tensor> x, dout;
    for (int r = 0; r < shards; ++r) {
      x.push_back(random_tensor({N, C}, rng, 1.0));
      dout.push_back(random_tensor({N, C}, rng, 1.0));
    }
    check_against_one_process(shards, x, dout, w);
  }
}

TEST_CASE("expert parallelism: a rank that receives no tokens runs none and the step is still exact", "[moe]") {
  std::mt19937 rng(7);
  MoEWeights w = random_weights(rng);
  // Positive tokens and router rows 0 and 1 positive, 2 and 3 zero: every token picks experts 0 and
  // 1, so with EP 2 rank 1 (experts 2 and 3) receives nothing.
  for (int e = 0; e < E; ++e)
    for (std::int64_t c = 0; c < C; ++c)
      w.router.data_as<double>()[e * C + c] = e < 2 ? 0.5 + 0.1 * static_cast<double>(e + c) : 0.0;
  std::vector<Tensor> x, dout;
  for (int r = 0; r < 2; ++r) {
    x.push_back(random_tensor({N, C}, rng, 1.0));
    for (std::int64_t i = 0; i < x.back().numel(); ++i)
      x.back().data_as<double>()[i] = std::abs(x.back().data_as<double>()[i]) + 0.1;
    dout.push_back(random_tensor({N, C}, rng, 1.0));
  }
  const std::vector<Step> ep = expert_parallel(2, x, dout, w);
  REQUIRE(ep[1].received == 0);
  CHECK(ep[0].received == 2 * N * K);
  CHECK(largest(ep[1].grads.fc_w, 0, ep[1].grads.fc_w.numel()) == 0);
  check_against_one_process(2, x, dout, w);
}
