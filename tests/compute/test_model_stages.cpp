// Pipeline stages on the compute side: how layers split into stages, and that a chain of
// GPTStages run as 1F1B runs them (two micro-batches in flight) computes what the whole GPT
// computes with gradient accumulation. Every tensor is compared bitwise except the tied
// embedding's gradient, whose four shares (lm head and lookup, two micro-batches) are summed in
// another order once the first and last stage each hold their own copy.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/model/gpt.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/model/stage_split.hpp"
#include "compute/random.hpp"
#include "support/micro_batch.hpp"
#include "support/tensor_compare.hpp"

using namespace troupe::compute;
using troupe::test::bitwise_equal;
using troupe::test::host_copy;
using troupe::test::micro_batch;
using troupe::test::MicroBatch;

namespace {

std::vector<std::pair<int, int>> ranges(const std::vector<StageLayers>& split) {
  std::vector<std::pair<int, int>> r;
  for (const auto& s : split) r.emplace_back(s.first_layer, s.last_layer);
  return r;
}

// The smallest largest stage over every way to cut n_layer blocks into `stages` non-empty runs.
std::int64_t brute_force_min_max(const GPTConfig& cfg, int stages) {
  std::int64_t best = -1;
  std::function<void(int, int, std::int64_t)> walk = [&](int first, int left, std::int64_t worst) {
    if (left == 1) {
      worst = std::max(worst, stage_parameter_count(cfg, first, cfg.n_layer));
      if (best < 0 || worst < best) best = worst;
      return;
    }
    for (int last = first + 1; last <= cfg.n_layer - (left - 1); ++last)
      walk(last, left - 1, std::max(worst, stage_parameter_count(cfg, first, last)));
  };
  walk(0, stages, 0);
  return best;
}

void check_split(const GPTConfig& cfg, int stages) {
  auto split = split_layers(cfg, stages);
  REQUIRE(split.ok());
  REQUIRE(split->size() == static_cast<std::size_t>(stages));
  const std::int64_t wte = std::int64_t{cfg.padded_vocab_size} * cfg.n_embd;
  std::int64_t total = 0, largest = 0;
  int next = 0;
  for (const auto& s : *split) {
    CHECK(s.first_layer == next);  // contiguous, in order, non-empty
    CHECK(s.layers() >= 1);
    next = s.last_layer;
    CHECK(s.params == stage_parameter_count(cfg, s.first_layer, s.last_layer));
    total += s.params;
    largest = std::max(largest, s.params);
  }
  CHECK(next == cfg.n_layer);
  // Every parameter once, plus the last stage's embedding copy when there are two ends.
  CHECK(total == ParameterLayout(cfg).total() + (stages > 1 ? wte : 0));
  CHECK(largest == brute_force_min_max(cfg, stages));
}

template <typename F>
double max_abs(const Tensor& t) {
  double m = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(double(t.data_as<F>()[i])));
  return m;
}

template <typename F>
double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::abs(double(a.data_as<F>()[i]) - double(b.data_as<F>()[i])));
  return m;
}

// p chained stages against the whole model, two micro-batches with loss scale 1/2. The stages
// run as 1F1B's steady state lets them: forward 0, forward 1, backward 0, backward 1 on every
// stage, activations and gradients handed on as copies (what a send would deliver). The micro-
// batches differ in B and T so the slots' shapes are independent too.
template <typename F>
void check_chain_equals_whole_model(int p, DType dtype) {
  const GPTConfig cfg{6, 32, 4, 16, 64, 64};
  const std::uint64_t seed = 21;
  CpuBackend backend(1);
  const MicroBatch mbs[2] = {micro_batch(2, 16, cfg.vocab_size, 100), micro_batch(3, 12, cfg.vocab_size, 200)};

  GPT whole(cfg, backend, dtype);
  whole.init_parameters(seed);
  whole.reserve(3, 16);
  whole.zero_grad();
  double whole_loss[2];
  for (int m = 0; m < 2; ++m) {
    whole_loss[m] = whole.forward(mbs[m].tokens, mbs[m].targets);
    whole.backward(0.5);
  }

  auto split = split_layers(cfg, p);
  REQUIRE(split.ok());
  std::vector<std::unique_ptr<GPTStage>> stages;
  for (const auto& s : *split) {
    stages.push_back(std::make_unique<GPTStage>(cfg, backend, s.first_layer, s.last_layer, dtype));
    stages.back()->init_parameters(seed);
    stages.back()->reserve(3, 16, 2);
    stages.back()->zero_grad();
  }
  double stage_loss[2];
  for (int m = 0; m < 2; ++m) {
    Tensor x = mbs[m].tokens;
    for (int s = 0; s < p; ++s) {
      GPTStage& st = *stages[static_cast<std::size_t>(s)];
      const double loss = st.forward(m, x, st.is_last() ? mbs[m].targets : Tensor{});
      if (st.is_last()) {
        stage_loss[m] = loss;
      } else {
        CHECK(std::isnan(loss));  // only the last stage has a loss
      }
      x = host_copy(backend, st.output(m));
    }
  }
  for (int m = 0; m < 2; ++m) {
    Tensor dy;
    for (int s = p - 1; s >= 0; --s) {
      GPTStage& st = *stages[static_cast<std::size_t>(s)];
      st.backward(m, dy, 0.5);
      dy = host_copy(backend, st.input_grad(m));
    }
  }

  for (int m = 0; m < 2; ++m) CHECK(std::memcmp(&whole_loss[m], &stage_loss[m], sizeof(double)) == 0);
  // Same kernels, same inputs, same order: every parameter and gradient but wte's is bitwise equal.
  std::int64_t covered = 0;
  for (const auto& st : stages) {
    for (const auto& v : st->views()) {
      if (v.name == "wte.weight") continue;
      INFO("stage [" << st->first_layer() << ", " << st->last_layer() << ") " << v.name);
      CHECK(bitwise_equal(st->param(v.name), whole.param(v.name)));
      CHECK(bitwise_equal(st->grad(v.name), whole.grad(v.name)));
      covered += v.numel();
    }
  }
  const std::int64_t wte_numel = whole.param("wte.weight").numel();
  CHECK(covered == whole.layout().total() - wte_numel);

  GPTStage& first = *stages.front();
  GPTStage& last = *stages.back();
  if (p == 1) {
    CHECK(bitwise_equal(first.tied_embedding_grad(), whole.grad("wte.weight")));
    return;
  }
  // The whole model accumulates dwte as ((head0 + lookup0) + head1) + lookup1 in one buffer (the
  // lm head's matmul adds into it with beta = 1, the lookup scatters into it); the pipeline sums
  // (head0 + head1) on the last stage and (lookup0 + lookup1) on the first. Only the association
  // of the same four terms differs: each of the three additions rounds to half an ulp of a
  // partial sum, so the results differ by a few ulp of the terms' size. Bound: 8 eps of the
  // largest entry (measured: 0.41 eps in f32, 0.82 eps in f64).
  Tensor summed = host_copy(backend, first.tied_embedding_grad());
  Tensor from_last = host_copy(backend, last.tied_embedding_grad());
  for (std::int64_t i = 0; i < summed.numel(); ++i) summed.data_as<F>()[i] += from_last.data_as<F>()[i];
  const double scale = max_abs<F>(whole.grad("wte.weight"));
  const double diff = max_abs_diff<F>(summed, whole.grad("wte.weight"));
  const double eps = std::numeric_limits<F>::epsilon();
  INFO("p=" << p << " wte gradient: max |difference| " << diff << ", max |entry| " << scale << ", "
            << diff / (eps * scale) << " eps of it");
  CHECK(scale > 0);
  CHECK(diff <= 8 * eps * scale);
  // Both ends start from the same embedding, so the tied weight is shared in value.
  CHECK(bitwise_equal(first.param("wte.weight"), last.param("wte.weight")));
}

}  // namespace

TEST_CASE("layer split balances stage parameters for small on 1 to 4 stages and tiny", "[model][pipeline]") {
  const GPTConfig small = *gpt_preset("small"), tiny = *gpt_preset("tiny");
  using R = std::vector<std::pair<int, int>>;
  CHECK(ranges(split_layers(small, 1).value()) == R{{0, 6}});
  CHECK(ranges(split_layers(small, 2).value()) == R{{0, 3}, {3, 6}});
  CHECK(ranges(split_layers(small, 3).value()) == R{{0, 2}, {2, 4}, {4, 6}});
  // 6 blocks on 4 stages cannot be even; the ends also carry the embeddings, so they get one.
  CHECK(ranges(split_layers(small, 4).value()) == R{{0, 1}, {1, 3}, {3, 5}, {5, 6}});
  CHECK(ranges(split_layers(tiny, 2).value()) == R{{0, 2}, {2, 4}});
  CHECK(ranges(split_layers(tiny, 3).value()) == R{{0, 1}, {1, 3}, {3, 4}});
  CHECK(ranges(split_layers(tiny, 4).value()) == R{{0, 1}, {1, 2}, {2, 3}, {3, 4}});
  for (int p = 1; p <= 4; ++p) {
    INFO("stages " << p);
    check_split(small, p);
    check_split(tiny, p);
  }
  // A large vocabulary weighs: gpt2's wte is worth about 5.5 blocks on each end.
  const GPTConfig gpt2 = *gpt_preset("gpt2");
  CHECK(ranges(split_layers(gpt2, 4).value()) == R{{0, 1}, {1, 6}, {6, 11}, {11, 12}});
  check_split(gpt2, 4);
}

TEST_CASE("layer split rejects fewer than one stage and more stages than layers", "[model][pipeline]") {
  const GPTConfig small = *gpt_preset("small");
  auto zero = split_layers(small, 0);
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().message == "pipeline stages must be at least 1, got 0");
  CHECK_FALSE(split_layers(small, -2).ok());
  auto seven = split_layers(small, 7);
  REQUIRE_FALSE(seven.ok());
  CHECK(seven.error().message == "cannot split 6 layers into 7 pipeline stages: every stage needs at least one layer");
  CHECK(split_layers(small, 6).ok());
  GPTConfig broken = small;
  broken.n_head = 5;
  auto bad = split_layers(broken, 2);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("model.n_head") != std::string::npos);
}

TEST_CASE("interleaved split gives p x v equal chunks and names the numbers otherwise", "[model][pipeline]") {
  const GPTConfig small = *gpt_preset("small");
  using R = std::vector<std::pair<int, int>>;
  CHECK(ranges(split_layers_interleaved(small, 2, 3).value()) == R{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}});
  CHECK(ranges(split_layers_interleaved(small, 3, 2).value()) == R{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}});
  CHECK(ranges(split_layers_interleaved(small, 2, 1).value()) == R{{0, 3}, {3, 6}});
  auto chunks = split_layers_interleaved(small, 3, 2).value();
  for (const auto& c : chunks) CHECK(c.params == stage_parameter_count(small, c.first_layer, c.last_layer));
  CHECK(chunks.front().params > chunks[1].params);  // the embeddings ride on chunk 0
  CHECK(chunks.back().params > chunks[1].params);   // ln_f and the wte copy on the last chunk

  auto uneven = split_layers_interleaved(small, 2, 2);
  REQUIRE_FALSE(uneven.ok());
  CHECK(uneven.error().message ==
        "interleaved pipeline: 6 layers do not divide into 2 stages x 2 virtual stages = 4 chunks of equal size");
  auto no_v = split_layers_interleaved(small, 2, 0);
  REQUIRE_FALSE(no_v.ok());
  CHECK(no_v.error().message == "virtual stages per pipeline stage must be at least 1, got 0");
  CHECK_FALSE(split_layers_interleaved(small, 0, 2).ok());
  CHECK_FALSE(split_layers_interleaved(small, 4, 2).ok());
}

TEST_CASE("a pipeline runs the balanced split with one chunk per stage and the interleaved one with more", "[model][pipeline]") {
  const GPTConfig small = *gpt_preset("small");
  // 6 blocks on 4 stages: only the balanced split exists (equal chunks cannot), so one chunk per
  // stage must take it.
  CHECK_FALSE(split_layers_interleaved(small, 4, 1).ok());
  CHECK(ranges(split_for_pipeline(small, 4, 1).value()) == ranges(split_layers(small, 4).value()));
  CHECK(ranges(split_for_pipeline(small, 2, 3).value()) == ranges(split_layers_interleaved(small, 2, 3).value()));
  CHECK_FALSE(split_for_pipeline(small, 2, 2).ok());
}

TEST_CASE("a split by speed evens each stage's compute over its speed", "[model][pipeline]") {
  GPTConfig model = *gpt_preset("small");
  model.n_layer = 12;
  const int T = model.block_size;
  using R = std::vector<std::pair<int, int>>;
  auto time_of = [&](const std::vector<StageLayers>& split, const std::vector<double>& speeds) {
    double worst = 0;
    for (std::size_t s = 0; s < split.size(); ++s)
      worst = std::max(worst, stage_compute_per_token(model, T, split[s].first_layer, split[s].last_layer) / speeds[s]);
    return worst;
  };
  for (const std::vector<double>& speeds : {std::vector<double>{1, 1}, std::vector<double>{1, 0.5},
                                            std::vector<double>{0.5, 1}, std::vector<double>{1, 0.25}}) {
    INFO("speeds " << speeds[0] << ", " << speeds[1]);
    const auto split = split_layers_by_speed(model, T, speeds).value();
    REQUIRE(split.size() == 2);
    CHECK(split[0].first_layer == 0);
    CHECK(split[0].last_layer == split[1].first_layer);
    CHECK(split[1].last_layer == 12);
    for (const StageLayers& stage : split)
      CHECK(stage.params == stage_parameter_count(model, stage.first_layer, stage.last_layer));
    // No cut does better on the slowest stage's time.
    for (int cut = 1; cut < 12; ++cut)
      CHECK(time_of(split, speeds) <= time_of({{0, cut, 0}, {cut, 12, 0}}, speeds));
  }
  // The lm head weighs on the last stage; half the speed there takes about half its blocks.
  const auto even = ranges(split_layers_by_speed(model, T, {1, 1}).value());
  const auto slow_last = ranges(split_layers_by_speed(model, T, {1, 0.5}).value());
  const auto slow_first = ranges(split_layers_by_speed(model, T, {0.5, 1}).value());
  CHECK(slow_last[1].second - slow_last[1].first < even[1].second - even[1].first);
  CHECK(slow_first[0].second - slow_first[0].first < even[0].second - even[0].first);
  CHECK(slow_first[0].second - slow_first[0].first <= 5);
  // The chooser: speeds only with one chunk a stage, one a stage.
  CHECK(ranges(split_for_pipeline(model, 2, 1, {1, 0.5}, T).value()) == slow_last);
  auto interleaved = split_for_pipeline(model, 2, 2, {1, 0.5}, T);
  REQUIRE_FALSE(interleaved.ok());
  CHECK(interleaved.error().message == "a split by speed places one chunk a stage; it does not apply to 2 virtual stages");
  auto count = split_for_pipeline(model, 3, 1, {1, 0.5}, T);
  REQUIRE_FALSE(count.ok());
  CHECK(count.error().message == "2 stage speeds for 3 stages");
  auto zero = split_layers_by_speed(model, T, {1, 0});
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().message == "stage 1's speed must be a positive number, got 0.000000");
  CHECK_FALSE(split_layers_by_speed(model, T, std::vector<double>(13, 1.0)).ok());  // more stages than layers
  CHECK(R(even) == R(ranges(split_layers_by_speed(model, T, {2, 2}).value())));        // only the ratio counts
}

TEST_CASE("a stage owns its slice of the layout and the last stage its own wte copy", "[model][pipeline]") {
  const GPTConfig cfg{6, 32, 4, 16, 64, 64};
  CpuBackend backend(1);
  GPT whole(cfg, backend);
  whole.init_parameters(9);
  const ParameterLayout& layout = whole.layout();
  auto split = split_layers(cfg, 3).value();
  GPTStage first(cfg, backend, split[0].first_layer, split[0].last_layer);
  GPTStage middle(cfg, backend, split[1].first_layer, split[1].last_layer);
  GPTStage last(cfg, backend, split[2].first_layer, split[2].last_layer);
  for (GPTStage* st : {&first, &middle, &last}) st->init_parameters(9);

  // The stages tile the global buffer; each one's params() starts with its global slice, as one
  // run, and a last stage's copy of wte follows as a second.
  using Range = std::pair<std::int64_t, std::int64_t>;
  auto global_of = [](const GPTStage::Run& r) { return Range{r.global, r.global + r.count}; };
  REQUIRE(first.global_runs().size() == 1);
  REQUIRE(middle.global_runs().size() == 1);
  REQUIRE(last.global_runs().size() == 2);
  CHECK(global_of(first.global_runs()[0]) == Range{0, layout.layer_range(1).second});
  CHECK(global_of(middle.global_runs()[0]) == Range{layout.layer_range(2).first, layout.layer_range(3).second});
  CHECK(global_of(last.global_runs()[0]) == Range{layout.layer_range(4).first, layout.total()});
  for (std::size_t s = 0; s < 3; ++s) {
    GPTStage& st = s == 0 ? first : s == 1 ? middle : last;
    CHECK(st.num_params() == split[s].params);
    const GPTStage::Run& own = st.global_runs()[0];
    CHECK(own.local == 0);
    CHECK_FALSE(own.embedding_copy);
    CHECK_FALSE(own.replicated);
    CHECK(bitwise_equal(st.params().slice(0, {own.count}), whole.params().slice(own.global, {own.count})));
  }
  CHECK_FALSE(first.has_embedding_copy());
  CHECK_FALSE(middle.has_embedding_copy());
  REQUIRE(last.has_embedding_copy());
  const std::int64_t wte_numel = std::int64_t{cfg.padded_vocab_size} * cfg.n_embd;
  const GPTStage::Run& copy = last.global_runs()[1];
  CHECK(copy.embedding_copy);
  CHECK(global_of(copy) == Range{0, wte_numel});
  CHECK(last.num_params() == last.global_runs()[0].count + wte_numel);
  // The copy sits after the global slice and is initialised as the global wte.weight is.
  CHECK(last.views().back().name == "wte.weight");
  CHECK(last.views().back().offset == copy.local);
  CHECK(bitwise_equal(last.param("wte.weight"), first.param("wte.weight")));
  CHECK(bitwise_equal(last.param("wte.weight"), whole.param("wte.weight")));

  CHECK(middle.holds("h.3.mlp.c_fc.weight"));
  CHECK_FALSE(middle.holds("h.1.mlp.c_fc.weight"));
  CHECK_FALSE(middle.holds("wte.weight"));
  CHECK_THROWS(middle.param("h.4.ln_1.weight"));
  CHECK_THROWS(middle.tied_embedding_grad());
  CHECK(first.tied_embedding_grad().numel() == wte_numel);
  CHECK(last.tied_embedding_grad().data() == last.grad("wte.weight").data());
}

TEST_CASE("a stage refuses inputs of the wrong kind", "[model][pipeline]") {
  const GPTConfig cfg{4, 16, 2, 8, 32, 32};
  CpuBackend backend(1);
  GPTStage first(cfg, backend, 0, 2), last(cfg, backend, 2, 4);
  first.reserve(2, 8, 2);
  last.reserve(2, 8, 2);
  MicroBatch mb = micro_batch(2, 8, cfg.vocab_size, 1);
  CHECK_THROWS(first.forward(0, mb.tokens, mb.targets));  // targets before the last stage
  CHECK_THROWS(last.forward(0, mb.tokens));               // tokens after the first stage
  CHECK_THROWS(first.forward(2, mb.tokens));              // slot not reserved
  CHECK_THROWS(last.backward(1, Tensor{}));               // backward before forward
  CHECK_THROWS(GPTStage(cfg, backend, 2, 2));             // empty stage
  CHECK_THROWS(GPTStage(cfg, backend, 3, 5));             // beyond n_layer
  first.forward(0, mb.tokens);
  CHECK_THROWS(first.backward(0, Tensor::zeros({2, 4, 16}, DType::f32)));  // gradient of another shape
  CHECK_NOTHROW(first.backward(0, Tensor::zeros({2, 8, 16}, DType::f32)));
}

TEST_CASE("1F1B-ordered stages equal the whole model on one stage, float32", "[model][pipeline]") {
  check_chain_equals_whole_model<float>(1, DType::f32);
}
TEST_CASE("1F1B-ordered stages equal the whole model on two stages, float32", "[model][pipeline]") {
  check_chain_equals_whole_model<float>(2, DType::f32);
}
TEST_CASE("1F1B-ordered stages equal the whole model on three stages, float32", "[model][pipeline]") {
  check_chain_equals_whole_model<float>(3, DType::f32);
}
TEST_CASE("1F1B-ordered stages equal the whole model on one stage, float64", "[model][pipeline]") {
  check_chain_equals_whole_model<double>(1, DType::f64);
}
TEST_CASE("1F1B-ordered stages equal the whole model on two stages, float64", "[model][pipeline]") {
  check_chain_equals_whole_model<double>(2, DType::f64);
}
TEST_CASE("1F1B-ordered stages equal the whole model on three stages, float64", "[model][pipeline]") {
  check_chain_equals_whole_model<double>(3, DType::f64);
}
