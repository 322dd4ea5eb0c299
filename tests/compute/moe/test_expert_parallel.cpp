// Expert parallelism at the compute level (compute/moe/expert_exchange.hpp): an expert group of EP
// threads (compute/context/local_exchange.hpp), each with its own tokens, against one process
// running every rank's tokens through all the experts, in float64; and with each rank's experts
// split in tensor slices too. Every rank's output, input
// gradient, routing losses, router and shared-expert gradients equal the one-process run of its
// tokens; every rank holds its E/EP experts alone, whose gradients equal the one-process gradient
// summed over all ranks' tokens; every slot reaches an expert and comes back.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "compute/context/local_exchange.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/moe/moe_layer.hpp"
#include "support/moe_layer_shape.hpp"
#include "support/random_tensor.hpp"
#include "support/thread_tensor_group.hpp"

using namespace troupe::compute;

namespace {

using troupe::test::normal_tensor;

using namespace troupe::test::moe_layer_shape;
constexpr double aux_scale = 0.7, z_scale = 0.3, tolerance = 1e-12;

MoEWeights random_weights(std::mt19937& rng) {
  return {normal_tensor({E, C}, rng, 0.8),    normal_tensor({E, H, C}, rng, 0.5), normal_tensor({E, H}, rng, 0.3),
          normal_tensor({E, C, H}, rng, 0.5), normal_tensor({E, C}, rng, 0.3),    normal_tensor({H, C}, rng, 0.5),
          normal_tensor({H}, rng, 0.3),       normal_tensor({C, H}, rng, 0.5),    normal_tensor({C}, rng, 0.3)};
}

std::vector<Tensor*> all_of(MoEWeights& w) {
  return {&w.router,      &w.fc_w,        &w.fc_b,          &w.proj_w,       &w.proj_b,
          &w.shared_fc_w, &w.shared_fc_b, &w.shared_proj_w, &w.shared_proj_b};
}

std::vector<const Tensor*> all_of(const MoEWeights& w) {
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

// `w`: the rank's weights (held_by, and under tensor slices its slice of each expert's width).
Step step(int shards, const ExpertGroup& group, const Tensor& x, const Tensor& dout, const MoEWeights& w) {
  CpuBackend backend(1);
  const MoEShape shape{E, K, true, C, w.fc_w.dim(1), shards};
  MoEActivations a = make_moe_activations(shape, N, allocator());
  MoEScratch scratch = make_moe_scratch(shape, N, allocator());
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
        steps[r] = step(shards, ExpertGroup{&group.rank(r)}, x[r], dout[r], held_by(w, r, shards));
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

// One process running each rank's tokens through every expert: each rank's step, and the
// gradients summed over the ranks (what the experts' owners hold).
struct OneProcess {
  std::vector<Step> of_rank;
  MoEWeights summed;
};

OneProcess one_process(int shards, const std::vector<Tensor>& x, const std::vector<Tensor>& dout, const MoEWeights& w) {
  OneProcess out{{}, zeros_like(w)};
  for (int r = 0; r < shards; ++r) {
    out.of_rank.push_back(step(1, ExpertGroup{}, x[r], dout[r], w));
    std::vector<Tensor*> into = all_of(out.summed), from = all_of(out.of_rank.back().grads);
    for (std::size_t i = 0; i < into.size(); ++i)
      for (std::int64_t j = 0; j < into[i]->numel(); ++j)
        into[i]->data_as<double>()[j] += from[i]->data_as<double>()[j];
  }
  return out;
}

void check_against_one_process(int shards, const std::vector<Tensor>& x, const std::vector<Tensor>& dout,
                               const MoEWeights& w) {
  const OneProcess reference = one_process(shards, x, dout, w);
  const std::vector<Step>& one = reference.of_rank;
  const MoEWeights& summed = reference.summed;
  const std::vector<Step> ep = expert_parallel(shards, x, dout, w);
  std::int64_t slots = 0, received = 0;
  std::vector<std::int64_t> routed(E, 0);
  for (int r = 0; r < shards; ++r) {
    INFO("EP " << shards << ", rank " << r);
    const Step& s = ep[r];
    CHECK(worst(s.out, one[r].out) <= tolerance);
    CHECK(worst(s.dinp, one[r].dinp) <= tolerance);
    CHECK(std::abs(s.aux - one[r].aux) <= tolerance);
    CHECK(std::abs(s.z - one[r].z) <= tolerance);
    // Replicated: the router's and the shared expert's gradients are the rank's own tokens'.
    const std::vector<const Tensor*> got = all_of(s.grads), alone = all_of(one[r].grads);
    for (std::size_t i : {0, 5, 6, 7, 8}) CHECK(worst(*got[i], *alone[i]) <= tolerance);
    // The experts: the rank holds its E/EP, whose gradients are the whole group's tokens'.
    const std::vector<const Tensor*> mine = {&s.grads.fc_w, &s.grads.fc_b, &s.grads.proj_w, &s.grads.proj_b},
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

// Part s of T of `t` along `axis`, copied: what a tensor slice holds of a stacked expert tensor
// (c_fc's rows, axis 1; c_proj's columns, axis 2) or of the shared expert's (axes 0 and 1).
Tensor part_along(const Tensor& t, std::size_t axis, int s, int T) {
  Shape shape = t.shape();
  const std::int64_t outer = shape_numel(Shape(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(axis)));
  const std::int64_t inner = shape_numel(Shape(shape.begin() + static_cast<std::ptrdiff_t>(axis) + 1, shape.end()));
  const std::int64_t whole = shape[axis], n = whole / T;
  shape[axis] = n;
  Tensor out = Tensor::zeros(shape, DType::f64);
  for (std::int64_t o = 0; o < outer; ++o)
    std::copy_n(t.data_as<double>() + (o * whole + s * n) * inner, n * inner, out.data_as<double>() + o * n * inner);
  return out;
}

// Slice s of T of `held`'s experts and shared expert (compute/model/tensor_shard.hpp): c_fc's rows
// and bias, c_proj's columns; the router and the output biases whole.
MoEWeights slice_of(const MoEWeights& held, int s, int T) {
  MoEWeights w = held;
  w.fc_w = part_along(held.fc_w, 1, s, T);
  w.fc_b = part_along(held.fc_b, 1, s, T);
  w.proj_w = part_along(held.proj_w, 2, s, T);
  w.shared_fc_w = part_along(held.shared_fc_w, 0, s, T);
  w.shared_fc_b = part_along(held.shared_fc_b, 0, s, T);
  w.shared_proj_w = part_along(held.shared_proj_w, 1, s, T);
  return w;
}

// `a` + `b`, elementwise.
Tensor plus(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::zeros(a.shape(), DType::f64);
  for (std::int64_t i = 0; i < a.numel(); ++i)
    out.data_as<double>()[i] = a.data_as<double>()[i] + b.data_as<double>()[i];
  return out;
}

}  // namespace

TEST_CASE("expert parallelism: one step on EP 2 and 4 equals one process, every gradient slice within 1e-12", "[moe]") {
  std::mt19937 rng(43);
  const MoEWeights w = random_weights(rng);
  for (int shards : {2, 4}) {
    std::vector<Tensor> x, dout;
    for (int r = 0; r < shards; ++r) {
      x.push_back(normal_tensor({N, C}, rng, 1.0));
      dout.push_back(normal_tensor({N, C}, rng, 1.0));
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
    x.push_back(normal_tensor({N, C}, rng, 1.0));
    for (std::int64_t i = 0; i < x.back().numel(); ++i)
      x.back().data_as<double>()[i] = std::abs(x.back().data_as<double>()[i]) + 0.1;
    dout.push_back(normal_tensor({N, C}, rng, 1.0));
  }
  const std::vector<Step> ep = expert_parallel(2, x, dout, w);
  REQUIRE(ep[1].received == 0);
  CHECK(ep[0].received == 2 * N * K);
  CHECK(largest(ep[1].grads.fc_w, 0, ep[1].grads.fc_w.numel()) == 0);
  check_against_one_process(2, x, dout, w);
}

// Tensor slices inside expert shards: rank r of the expert group holds its E/EP experts, and each
// of its T tensor slices H/T of their width; the slices of a rank share its tokens (a tensor group
// routes alike), and slice s of every rank forms an expert group of its own. The slices' outputs and
// input gradients are partial sums (summed over the slices here, as the block's sum over the tensor
// group does); every gradient is the slice of one process's.
TEST_CASE("expert parallelism with 2 tensor slices: EP 2 equals one process, every gradient slice within 1e-12",
          "[moe][tensor]") {
  constexpr int EP = 2, T = 2;
  std::mt19937 rng(11);
  const MoEWeights w = random_weights(rng);
  std::vector<Tensor> x, dout;
  for (int r = 0; r < EP; ++r) {
    x.push_back(normal_tensor({N, C}, rng, 1.0));
    dout.push_back(normal_tensor({N, C}, rng, 1.0));
  }
  const OneProcess reference = one_process(EP, x, dout, w);
  std::vector<std::unique_ptr<context::LocalContextGroup>> expert_groups;  // one per slice
  std::vector<std::unique_ptr<troupe::test::ThreadGroup>> tensor_groups;   // one per rank
  for (int s = 0; s < T; ++s) expert_groups.push_back(std::make_unique<context::LocalContextGroup>(EP));
  for (int r = 0; r < EP; ++r) tensor_groups.push_back(std::make_unique<troupe::test::ThreadGroup>(T));
  std::vector<Step> steps(EP * T);  // [r·T + s]
  std::vector<std::exception_ptr> failed(EP * T);
  std::vector<std::thread> threads;
  for (int r = 0; r < EP; ++r)
    for (int s = 0; s < T; ++s)
      threads.emplace_back([&, r, s] {
        try {
          ExpertGroup group{&expert_groups[s]->rank(r)};
          group.slice = s;
          group.slices = T;
          group.slice_sum = tensor_groups[r]->member(s).all_reduce;
          steps[r * T + s] = step(EP, group, x[r], dout[r], slice_of(held_by(w, r, EP), s, T));
        } catch (...) {
          failed[r * T + s] = std::current_exception();
        }
      });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& f : failed)
    if (f) std::rethrow_exception(f);
  for (int r = 0; r < EP; ++r) {
    const Step& alone = reference.of_rank[r];
    INFO("rank " << r);
    CHECK(worst(plus(steps[r * T].out, steps[r * T + 1].out), alone.out) <= tolerance);
    CHECK(worst(plus(steps[r * T].dinp, steps[r * T + 1].dinp), alone.dinp) <= tolerance);
    const MoEWeights experts = held_by(reference.summed, r, EP);
    for (int s = 0; s < T; ++s) {
      INFO("slice " << s);
      const Step& got = steps[r * T + s];
      CHECK(std::abs(got.aux - alone.aux) <= tolerance);
      CHECK(std::abs(got.z - alone.z) <= tolerance);
      CHECK(got.sent == N * K);
      // The router's gradient is the rank's tokens', the same bits on every slice.
      CHECK(worst(got.grads.router, alone.grads.router) <= tolerance);
      CHECK(std::memcmp(got.grads.router.data(), steps[r * T].grads.router.data(), got.grads.router.nbytes()) == 0);
      const MoEWeights want_shared = slice_of(alone.grads, s, T), want_experts = slice_of(experts, s, T);
      for (const auto& [mine, want] :
           std::vector<std::pair<const Tensor*, const Tensor*>>{{&got.grads.shared_fc_w, &want_shared.shared_fc_w},
                                                                {&got.grads.shared_fc_b, &want_shared.shared_fc_b},
                                                                {&got.grads.shared_proj_w, &want_shared.shared_proj_w},
                                                                {&got.grads.shared_proj_b, &alone.grads.shared_proj_b},
                                                                {&got.grads.fc_w, &want_experts.fc_w},
                                                                {&got.grads.fc_b, &want_experts.fc_b},
                                                                {&got.grads.proj_w, &want_experts.proj_w},
                                                                {&got.grads.proj_b, &experts.proj_b}}) {
        REQUIRE(mine->numel() == want->numel());
        CHECK(worst(*mine, *want) <= tolerance);
      }
    }
  }
}
