// Context shards on the compute side: C ranks of one sequence, run as threads exchanging their
// ring blocks and all-to-all blocks through LocalContextGroup, take the step one process takes. Each
// rank runs the whole model on its rows (chunks r and 2C-1-r of 2C), weighs its loss as one of C
// parts, and the sum of the ranks' gradients equals the one-process gradient: per parameter,
// relative to its norm, within 1e-12 in f64 and 1e-6 in f32, for ring and all_to_all at C = 2 and
// 4; the mean of the ranks' losses is the one-process loss. One parameter is measured otherwise:
// the key bias's true gradient is 0 (softmax ignores one shift of every key), so what any run gets
// for it is rounding noise, and two runs that sum in different orders get different noise; it is
// compared against the norm of the whole block's attention weight gradient instead. The same holds
// with the model split into two pipeline stages (each rank's second stage taking its first stage's
// rows), with the backward split into its input and weight halves (zero-bubble schedules), and with
// two micro-batches forwarded before the first backward (a pipeline stage's activation slots).
// A model with experts in every block takes the same step, its routing losses on: each rank routes
// its own rows, and the losses' load and means are the micro-batch's, summed over the group.

#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "compute/context/context_split.hpp"
#include "compute/context/local_exchange.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/model/gpt_stage.hpp"
#include "support/micro_batch.hpp"
#include "support/moe_config.hpp"
#include "support/tensor_compare.hpp"

using namespace troupe::compute;
using context::ContextMethod;

namespace {

const GPTConfig dense{2, 32, 4, 16, 260, 384};
constexpr int B = 2, T = 16;

struct StepState {
  double loss = 0;
  Tensor grads;  // host copy, f64
};

Tensor as_f64(const Tensor& t) {
  Tensor out = Tensor::zeros(t.shape(), DType::f64);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    out.data_as<double>()[i] = t.dtype() == DType::f32 ? t.data_as<float>()[i] : t.data_as<double>()[i];
  return out;
}

// How the model runs: one stage or two (a pipeline's, the second taking the first's output), and
// each backward whole or split into its input and weight halves (the zero-bubble schedules').
struct Run {
  int stages = 1;
  bool split_backward = false;
  int in_flight = 1;  // micro-batches forwarded before the first backward, each in its own slot
  GPTConfig model = dense;
};

// One step of the model as `run` has it, on `rows` rows, the stages' gradients summed into the
// global layout (the last stage's copy of wte onto wte: the tied embedding's two shares).
StepState take_step(const Run& run, DType dtype, Recompute recompute, ContextShardGroup context, Backend& backend,
                    const std::vector<Tensor>& tokens, const std::vector<Tensor>& targets, int rows,
                    double loss_scale) {
  const GPTConfig& config = run.model;
  std::vector<std::unique_ptr<GPTStage>> stages;
  const int per_stage = config.n_layer / run.stages;
  for (int k = 0; k < run.stages; ++k) {
    stages.push_back(std::make_unique<GPTStage>(config, backend, k * per_stage, (k + 1) * per_stage, dtype, recompute,
                                                nullptr, TensorShardGroup{}, context));
    stages.back()->init_parameters(21);
    stages.back()->set_moe_loss_coefficients(0.01, 0.001);
    stages.back()->reserve(B, rows, run.in_flight, run.split_backward);
    stages.back()->zero_grad();
  }
  StepState out;
  for (int m = 0; m < run.in_flight; ++m) {
    Tensor input = tokens[static_cast<std::size_t>(m)];
    for (auto& stage : stages) {
      const double loss = stage->forward(m, input, stage->is_last() ? targets[static_cast<std::size_t>(m)] : Tensor{});
      if (stage->is_last()) out.loss += loss / run.in_flight;
      input = stage->output(m);
    }
  }
  for (int m = 0; m < run.in_flight; ++m) {
    Tensor output_grad;
    for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
      GPTStage& stage = **it;
      if (run.split_backward) {
        stage.backward_input(m, output_grad, loss_scale / run.in_flight);
        stage.backward_weights(m);
      } else {
        stage.backward(m, output_grad, loss_scale / run.in_flight);
      }
      if (!stage.is_first()) output_grad = stage.input_grad(m);
    }
  }
  out.grads = Tensor::zeros({ParameterLayout(config).total()}, DType::f64);
  for (auto& stage : stages) {
    const Tensor local = as_f64(troupe::test::host_copy(backend, stage->grads()));
    for (const GPTStage::Run& r : stage->global_runs())
      for (std::int64_t i = 0; i < r.count; ++i)
        out.grads.data_as<double>()[r.global + i] += local.data_as<double>()[r.local + i];
  }
  return out;
}

// Micro-batch m of a step: its seed.
troupe::test::MicroBatch batch_of(int m) { return troupe::test::micro_batch(B, T, dense.vocab_size, 3 + m); }

StepState one_process(DType dtype, const Run& run) {
  CpuBackend backend(1);
  std::vector<Tensor> tokens, targets;
  for (int m = 0; m < run.in_flight; ++m) {
    tokens.push_back(batch_of(m).tokens);
    targets.push_back(batch_of(m).targets);
  }
  return take_step({1, false, run.in_flight, run.model}, dtype, Recompute::none, {}, backend, tokens, targets, T, 1.0);
}

// The ranks' mean loss and summed gradients.
StepState context_shards(int shards, ContextMethod method, DType dtype, Recompute recompute, const Run& run) {
  context::LocalContextGroup group(shards);
  const context::ContextSplit split = context::make_context_split(T, shards).value();
  std::vector<StepState> states(static_cast<std::size_t>(shards));
  std::vector<std::thread> threads;
  for (int r = 0; r < shards; ++r)
    threads.emplace_back([&, r] {
      CpuBackend backend(1);
      std::vector<Tensor> tokens, targets;
      for (int m = 0; m < run.in_flight; ++m) {
        const troupe::test::MicroBatch batch = batch_of(m);
        tokens.push_back(Tensor::zeros({B, split.local_rows()}, DType::i32));
        targets.push_back(Tensor::zeros({B, split.local_rows()}, DType::i32));
        context::take_rows(tokens.back().data_as<std::int32_t>(), batch.tokens.data_as<std::int32_t>(), B, 1, split, r);
        context::take_rows(targets.back().data_as<std::int32_t>(), batch.targets.data_as<std::int32_t>(), B, 1, split,
                           r);
      }
      states[static_cast<std::size_t>(r)] =
          take_step(run, dtype, recompute, ContextShardGroup{method, split, &group.rank(r)}, backend, tokens, targets,
                    split.local_rows(), 1.0 / shards);
    });
  for (auto& t : threads) t.join();
  StepState sum{0, Tensor::zeros(states[0].grads.shape(), DType::f64)};
  for (const StepState& s : states) {
    sum.loss += s.loss / shards;
    for (std::int64_t i = 0; i < sum.grads.numel(); ++i) sum.grads.data_as<double>()[i] += s.grads.data_as<double>()[i];
  }
  return sum;
}

double norm_of(const Tensor& t, const ParameterView& v) {
  double n = 0;
  for (std::int64_t i = v.offset; i < v.offset + v.numel(); ++i) n += t.data_as<double>()[i] * t.data_as<double>()[i];
  return std::sqrt(n);
}

// The largest, over the parameters, of |got - want| / |want| as vector norms (the key bias
// against its block's c_attn weight gradient, see above).
double worst_relative(const GPTConfig& config, const Tensor& got, const Tensor& want, std::string& worst_name) {
  const ParameterLayout layout(config);
  double worst = 0;
  for (const ParameterView& v : layout.views()) {
    double diff = 0;
    for (std::int64_t i = v.offset; i < v.offset + v.numel(); ++i) {
      const double d = got.data_as<double>()[i] - want.data_as<double>()[i];
      diff += d * d;
    }
    const bool bias = v.name.find("attn.c_attn.bias") != std::string::npos;
    const std::string of = bias ? v.name.substr(0, v.name.size() - 4) + "weight" : v.name;
    double rel = std::sqrt(diff) / norm_of(want, layout.find(of));
    if (bias) {
      // q and v thirds of the bias are compared on their own norm; the k third (true gradient 0)
      // against the weight's.
      const std::int64_t third = v.numel() / 3;
      double q_and_v = 0, q_and_v_norm = 0;
      for (std::int64_t i = 0; i < v.numel(); ++i) {
        if (i / third == 1) continue;
        const double w = want.data_as<double>()[v.offset + i], d = got.data_as<double>()[v.offset + i] - w;
        q_and_v += d * d;
        q_and_v_norm += w * w;
      }
      rel = std::max(rel, std::sqrt(q_and_v / q_and_v_norm));
    }
    if (rel > worst) {
      worst = rel;
      worst_name = v.name;
    }
  }
  return worst;
}

void check_against_one_process(DType dtype, double tolerance, Recompute recompute = Recompute::none,
                               const Run& run = {}) {
  const StepState whole = one_process(dtype, run);
  for (ContextMethod method : {ContextMethod::ring, ContextMethod::all_to_all}) {
    for (int shards : {2, 4}) {
      INFO((method == ContextMethod::ring ? "ring" : "all_to_all")
           << " over " << shards << " ranks, " << run.stages << " stage(s)"
           << (run.split_backward ? ", backward split" : "") << ", " << run.in_flight << " in flight");
      const StepState parts = context_shards(shards, method, dtype, recompute, run);
      CHECK(parts.loss == Approx(whole.loss).epsilon(tolerance));
      std::string name;
      const double worst = worst_relative(run.model, parts.grads, whole.grads, name);
      INFO("gradient of " << name << ": " << worst);
      CHECK(worst <= tolerance);
    }
  }
}

}  // namespace

TEST_CASE("context shards: one step on C = 2 and 4, ring and all_to_all, equals one process in f64", "[context]") {
  check_against_one_process(DType::f64, 1e-12);
}

TEST_CASE("context shards: one step on C = 2 and 4, ring and all_to_all, equals one process in f32", "[context]") {
  check_against_one_process(DType::f32, 1e-6);
}

TEST_CASE("context shards: with selective and full recompute the step still equals one process", "[context]") {
  check_against_one_process(DType::f64, 1e-12, Recompute::selective);
  check_against_one_process(DType::f64, 1e-12, Recompute::full);
}

TEST_CASE(
    "context shards: as two pipeline stages, with the backward split in two, and with two micro-batches in "
    "flight, the step equals one process",
    "[context]") {
  check_against_one_process(DType::f64, 1e-12, Recompute::none, {2, false});
  check_against_one_process(DType::f64, 1e-12, Recompute::none, {1, true});
  check_against_one_process(DType::f64, 1e-12, Recompute::none, {2, true});
  check_against_one_process(DType::f32, 1e-6, Recompute::none, {2, true});
  // Each slot keeps its own attention state: the first micro-batch's backward after the second's forward.
  check_against_one_process(DType::f64, 1e-12, Recompute::none, {2, false, 2});
  check_against_one_process(DType::f64, 1e-12, Recompute::selective, {2, true, 2});
}

TEST_CASE(
    "context shards with experts: the routing losses' load and means are the micro-batch's, and the step equals one "
    "process, also on two stages, with two micro-batches in flight and under recompute",
    "[context][moe]") {
  const GPTConfig moe = troupe::test::with_experts(dense);
  check_against_one_process(DType::f64, 1e-12, Recompute::none, {1, false, 1, moe});
  check_against_one_process(DType::f32, 1e-6, Recompute::none, {1, false, 1, moe});
  check_against_one_process(DType::f64, 1e-12, Recompute::none, {2, false, 2, moe});
  check_against_one_process(DType::f64, 1e-12, Recompute::selective, {1, false, 1, moe});
  check_against_one_process(DType::f64, 1e-12, Recompute::full, {2, false, 2, moe});
}
