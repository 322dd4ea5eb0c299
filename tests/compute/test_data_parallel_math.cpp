// The trainer's data-parallel arithmetic on its own: n ranks of micro-batch b take the same steps
// as one process with batch n·b, with and without ZeRO sharding of the optimizer. Here the ranks
// are threads whose collectives go through shared memory in a fixed order; tests/apps/ runs the
// same check with real processes and UCX collectives.

#include <catch2/catch.hpp>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "compute/context/local_exchange.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/random.hpp"
#include "compute/train/trainer.hpp"
#include "support/moe_config.hpp"

using namespace troupe::compute;

namespace {

std::vector<std::uint16_t> random_stream(std::size_t n, int vocab) {
  std::vector<std::uint16_t> s(n);
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<std::uint16_t>(hash_combine(17, i) % vocab);
  return s;
}

TrainerOptions base_options() {
  TrainerOptions o;
  o.seq_len = 32;
  o.lr = {1e-3, 1e-4, 1, 4};
  o.moe_aux_coef = 0.1;  // a model with experts only
  o.moe_z_coef = 0.01;
  return o;
}

const GPTConfig config{2, 32, 4, 32, 64, 64};

// The same model with 4 experts, top-2, and a shared expert in both blocks.
GPTConfig with_experts() { return troupe::test::with_experts(config); }

using MakeSource = std::function<std::unique_ptr<ShardedParameters>(Backend&)>;

// The parameters this rank keeps after the steps: all of them, or its ZeRO-3 shard (written at
// their global offsets into a buffer of the whole model's size, the rest zero).
std::vector<float> train(TrainerOptions o, const std::vector<std::uint16_t>& data, int steps,
                         std::vector<double>* losses, const MakeSource& make_source = {},
                         const GPTConfig& model_config = config) {
  CpuBackend backend(1);
  std::unique_ptr<ShardedParameters> source = make_source ? make_source(backend) : nullptr;
  o.data_parallel.sharded = source.get();
  GPT model(model_config, backend, DType::f32, Recompute::none, source.get());
  model.init_parameters(5);
  Trainer trainer(model, o, data, data);
  for (int i = 0; i < steps; ++i) {
    double loss = trainer.step().loss;
    if (losses) losses->push_back(loss);
  }
  std::vector<float> kept(static_cast<std::size_t>(model.layout().total()), 0.0f);
  const float* p = model.params().data_as<float>();
  std::copy(p, p + model.params().numel(), kept.begin() + model.kept_begin());
  return kept;
}

// Two ranks as threads; the collectives sum through shared memory in a fixed order. Returns
// each rank's final parameters and losses.
struct TwoRanks {
  std::vector<float> params[2];
  std::vector<double> losses[2];
  // ZeRO-3: the unit collectives each rank posted.
  int gathers[2] = {0, 0}, reduce_scatters[2] = {0, 0};
};

// `grad_accum` micro-batches each, or with `shares` the group's 2·grad_accum unevenly. Under ZeRO-3,
// `hold` keeps every unit gathered for the step (ShardedParameters::hold_for_step).
TwoRanks run_two_ranks(const std::vector<std::uint16_t>& data, int steps, ZeroStage zero_stage,
                       const GPTConfig& model_config = config, int grad_accum = 1, const std::vector<int>& shares = {},
                       bool hold = false) {
  const std::int64_t total = ParameterLayout(model_config).total();
  const std::int64_t half = (total + 1) / 2;  // shard 0 = [0, half), shard 1 = [half, total)
  std::vector<float> slots[2] = {std::vector<float>(total), std::vector<float>(total)};
  double scalar_slots[2] = {0, 0};
  std::barrier sync(2);
  TwoRanks out;
  auto rank_main = [&](int rank) {
    const std::int64_t begin = rank == 0 ? 0 : half, end = rank == 0 ? half : total;
    auto exchange = [&](const float* values, std::int64_t n) {
      std::memcpy(slots[rank].data(), values, n * sizeof(float));
      sync.arrive_and_wait();
    };
    auto scalar_sum = [&](double x) {
      scalar_slots[rank] = x;
      sync.arrive_and_wait();
      double s = scalar_slots[0] + scalar_slots[1];
      sync.arrive_and_wait();
      return s;
    };
    TrainerOptions o = base_options();
    o.batch_size = 2;
    o.grad_accum = grad_accum;
    o.micro_shares = shares;
    DataParallel& dp = o.data_parallel;
    dp.rank = rank;
    dp.size = 2;
    dp.zero_stage = zero_stage;
    if (shards_optimizer_state(zero_stage)) dp.shard_begin = begin, dp.shard_end = end;
    // A bucket is elements [offset, offset + numel) of the buffer, summed at once.
    dp.start_sum = [&](Tensor bucket, std::int64_t offset) {
      std::memcpy(slots[rank].data() + offset, bucket.data_as<float>(), bucket.numel() * sizeof(float));
      sync.arrive_and_wait();
      float* g = bucket.data_as<float>();
      for (std::int64_t i = 0; i < bucket.numel(); ++i) g[i] = slots[0][offset + i] + slots[1][offset + i];
      sync.arrive_and_wait();
    };
    dp.wait_sums = [] {};
    dp.reduce_scatter_gradients = [&, begin, end](Tensor& grads) {
      exchange(grads.data_as<float>(), total);
      float* g = grads.data_as<float>();
      for (std::int64_t i = begin; i < end; ++i) g[i] = slots[0][i] + slots[1][i];
      sync.arrive_and_wait();
    };
    dp.all_gather_parameters = [&](Tensor& params) {
      exchange(params.data_as<float>(), total);
      float* p = params.data_as<float>();
      for (std::int64_t i = 0; i < total; ++i) p[i] = slots[i < half ? 0 : 1][i];
      sync.arrive_and_wait();
    };
    dp.sum = scalar_sum;
    dp.mean = [&](double x) { return scalar_sum(x) / 2; };
    // ZeRO-3 exchanges one unit at a time: position p's piece of it is counts[p] elements long.
    ShardExchange units;
    units.start_all_gather = [&](Tensor unit, std::vector<std::int64_t> counts) {
      ++out.gathers[rank];
      exchange(unit.data_as<float>(), unit.numel());
      float* u = unit.data_as<float>();
      const std::int64_t other = rank == 0 ? counts[0] : 0, count = counts[1 - rank];
      std::memcpy(u + other, slots[1 - rank].data() + other, count * sizeof(float));
      sync.arrive_and_wait();
      return ShardExchange::Ticket{0};
    };
    units.start_reduce_scatter = [&](Tensor unit, std::vector<std::int64_t> counts) {
      ++out.reduce_scatters[rank];
      exchange(unit.data_as<float>(), unit.numel());
      float* u = unit.data_as<float>();
      const std::int64_t own = rank == 0 ? 0 : counts[0];
      for (std::int64_t i = own; i < own + counts[rank]; ++i) u[i] = slots[0][i] + slots[1][i];
      sync.arrive_and_wait();
      return ShardExchange::Ticket{0};
    };
    units.wait = [](ShardExchange::Ticket) {};
    MakeSource make_source;
    if (shards_parameters(zero_stage)) {
      make_source = [&, rank](Backend& backend) {
        auto source = std::make_unique<ShardedParameters>(backend, GPT::parameter_units(model_config), DType::f32, rank,
                                                          std::vector<std::int64_t>{0, half, total}, units, true);
        if (hold) source->hold_for_step();
        return source;
      };
    }
    out.params[rank] = train(o, data, steps, &out.losses[rank], make_source, model_config);
  };
  std::thread other(rank_main, 1);
  rank_main(0);
  other.join();
  return out;
}

// Under ZeRO-3 each rank kept only its shard (zeros elsewhere): both then hold the whole model.
void merge_shards(TwoRanks& run) {
  const std::int64_t half = (ParameterLayout(config).total() + 1) / 2;
  for (std::size_t i = 0; i < run.params[0].size(); ++i) {
    const int keeper = static_cast<std::int64_t>(i) < half ? 0 : 1;
    CHECK(run.params[1 - keeper][i] == 0.0f);
    run.params[0][i] = run.params[1][i] = run.params[keeper][i];
  }
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double max_diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, double(std::abs(a[i] - b[i])));
  return max_diff;
}

}  // namespace

TEST_CASE("two data-parallel ranks of batch b take the steps of one process of batch 2b, with ZeRO 0 to 3",
          "[model][dp]") {
  const auto data = random_stream(40000, 64);
  const int steps = 4;
  TrainerOptions single = base_options();
  single.batch_size = 4;
  std::vector<double> single_losses;
  const auto reference = train(single, data, steps, &single_losses);

  std::vector<float> plain, sharded_gradients;
  for (ZeroStage stage : zero_stages) {
    TwoRanks run = run_two_ranks(data, steps, stage);
    if (stage == ZeroStage::parameters) merge_shards(run);
    CHECK(std::memcmp(run.params[0].data(), run.params[1].data(), run.params[0].size() * sizeof(float)) == 0);
    const double max_diff = max_difference(reference, run.params[0]);
    std::printf("ZeRO stage %d, 2 ranks x 2 vs 1 x 4: max parameter difference after %d steps %.3g\n",
                zero_number(stage), steps, max_diff);
    CHECK(max_diff < 1e-5);
    for (int s = 0; s < steps; ++s) CHECK(run.losses[0][s] == Approx(single_losses[s]).epsilon(1e-5));
    if (stage == ZeroStage::none) plain = run.params[0];
    // ZeRO-1 does the same arithmetic as plain data parallelism, element for element.
    if (stage == ZeroStage::optimizer_state)
      CHECK(std::memcmp(plain.data(), run.params[0].data(), plain.size() * sizeof(float)) == 0);
    // ZeRO-3 sums each element in the order ZeRO-2 does, one block at a time.
    if (stage == ZeroStage::gradients) sharded_gradients = run.params[0];
    if (stage == ZeroStage::parameters)
      CHECK(std::memcmp(sharded_gradients.data(), run.params[0].data(), plain.size() * sizeof(float)) == 0);
  }
}

// train.balance static: the same 8 micro-batches a step, 3 + 1 or 1 + 3 instead of 2 + 2. Each
// micro-batch weighs 1/4 in both, so only the order of the additions differs. Under ZeRO-3 each
// rank runs its share as one batch (Trainer::step).
TEST_CASE("two data-parallel ranks of uneven shares take the steps of the even split, with ZeRO 0 to 3",
          "[model][dp][balance]") {
  const auto data = random_stream(40000, 64);
  const int steps = 4;
  const TwoRanks even = run_two_ranks(data, steps, ZeroStage::none, config, 2);
  for (ZeroStage stage : zero_stages) {
    for (const std::vector<int>& shares : {std::vector<int>{3, 1}, std::vector<int>{1, 3}}) {
      TwoRanks uneven = run_two_ranks(data, steps, stage, config, 2, shares);
      if (stage == ZeroStage::parameters) {
        merge_shards(uneven);
        // One pass each a step: both ranks posted as many unit collectives, whatever their shares.
        CHECK(uneven.gathers[0] == uneven.gathers[1]);
        CHECK(uneven.reduce_scatters[0] == uneven.reduce_scatters[1]);
      }
      CHECK(std::memcmp(uneven.params[0].data(), uneven.params[1].data(), uneven.params[0].size() * sizeof(float)) ==
            0);
      const double max_diff = max_difference(even.params[0], uneven.params[0]);
      std::printf("ZeRO %d, shares %d + %d against 2 + 2: max parameter difference after %d steps %.3g\n",
                  zero_number(stage), shares[0], shares[1], steps, max_diff);
      CHECK(max_diff < 1e-5);
      CHECK(max_diff > 0);  // the additions' order did change: the test compares two computations
      for (int s = 0; s < steps; ++s) {
        CHECK(uneven.losses[0][s] == uneven.losses[1][s]);
        CHECK(uneven.losses[0][s] == Approx(even.losses[0][s]).epsilon(1e-6));
      }
    }
  }
}

// ZeRO-3 on pipeline stages and tensor shards under train.balance: replicas run different numbers
// of micro-batches, so each unit is gathered once a step and its gradient reduce-scattered once,
// after the step's last backward (ShardedParameters::hold_for_step).
TEST_CASE(
    "a ZeRO-3 source held for the step gathers and reduce-scatters each unit once a step however many micro-batches "
    "run, and takes the steps of one that is not held",
    "[model][dp][balance]") {
  const auto data = random_stream(40000, 64);
  const int steps = 3;
  const int units = static_cast<int>(GPT::parameter_units(config).size());
  TwoRanks unheld = run_two_ranks(data, steps, ZeroStage::parameters, config, 3);
  merge_shards(unheld);
  for (int micro_batches : {1, 3}) {
    TwoRanks held = run_two_ranks(data, steps, ZeroStage::parameters, config, micro_batches, {}, true);
    for (int rank : {0, 1}) {
      CHECK(held.gathers[rank] == units * steps);
      CHECK(held.reduce_scatters[rank] == units * steps);
    }
    if (micro_batches == 1) continue;
    // Held over 3 micro-batches a unit's gradient sums them in its buffer before one reduce-scatter.
    CHECK(unheld.gathers[0] > units * steps);
    merge_shards(held);
    const double max_diff = max_difference(unheld.params[0], held.params[0]);
    std::printf("ZeRO-3 held for the step, 3 micro-batches: max parameter difference after %d steps %.3g\n", steps,
                max_diff);
    CHECK(max_diff < 1e-5);
    for (int s = 0; s < steps; ++s) CHECK(held.losses[0][s] == Approx(unheld.losses[0][s]).epsilon(1e-6));
  }
}

// What lets a job that lost a replica go on with twice the micro-batches (an elastic shrink) and
// still train the same weights: each micro-batch's gradient is computed whole and added to the
// earlier ones', as the data-parallel sum adds the ranks'.
TEST_CASE("one process accumulating 2 micro-batches of b takes, bit for bit, the steps of two data-parallel ranks of b",
          "[model][dp][accumulation]") {
  const auto data = random_stream(40000, 64);
  const int steps = 4;
  TrainerOptions accumulating = base_options();
  accumulating.batch_size = 2;
  accumulating.grad_accum = 2;
  const auto accumulated = train(accumulating, data, steps, nullptr);
  const TwoRanks two = run_two_ranks(data, steps, ZeroStage::none);
  CHECK(std::memcmp(accumulated.data(), two.params[0].data(), accumulated.size() * sizeof(float)) == 0);
  // Three micro-batches sum as ((g0 + g1) + g2): not the order of one batch of 3b, but close.
  accumulating.grad_accum = 3;
  TrainerOptions whole = base_options();
  whole.batch_size = 6;
  const auto three = train(accumulating, data, steps, nullptr), one = train(whole, data, steps, nullptr);
  const double max_diff = max_difference(one, three);
  INFO("max parameter difference, 3 micro-batches of 2 against one batch of 6: " << max_diff);
  CHECK(max_diff < 1e-5);
}

// With experts each micro-batch's routing losses are its own (docs/moe.md), so the reference is a
// process accumulating the ranks' micro-batches; the experts are ordinary parameters to ZeRO.
TEST_CASE(
    "with experts, two data-parallel ranks of b take the steps of one process accumulating 2 micro-batches "
    "of b, with ZeRO 0 to 3",
    "[model][dp][moe]") {
  const auto data = random_stream(40000, 64);
  const int steps = 3;
  TrainerOptions accumulating = base_options();
  accumulating.batch_size = 2;
  accumulating.grad_accum = 2;
  std::vector<double> single_losses;
  const auto reference = train(accumulating, data, steps, &single_losses, {}, with_experts());
  for (ZeroStage stage : zero_stages) {
    TwoRanks run = run_two_ranks(data, steps, stage, with_experts());
    if (stage == ZeroStage::parameters) {
      const std::int64_t half = (ParameterLayout(with_experts()).total() + 1) / 2;
      for (std::size_t i = 0; i < run.params[0].size(); ++i)
        run.params[0][i] = run.params[static_cast<std::int64_t>(i) < half ? 0 : 1][i];
    }
    const double max_diff = max_difference(reference, run.params[0]);
    INFO("ZeRO stage " << zero_number(stage) << ": max parameter difference after " << steps << " steps " << max_diff);
    if (stage == ZeroStage::none)
      CHECK(std::memcmp(reference.data(), run.params[0].data(), reference.size() * sizeof(float)) == 0);
    CHECK(max_diff < 1e-5);
    for (int s = 0; s < steps; ++s) CHECK(run.losses[0][s] == Approx(single_losses[s]).epsilon(1e-5));
  }
}

namespace {

// What a rank of the run below keeps, in float64 so that the comparison sees the arithmetic's
// rounding alone: its parameters written at their places in the whole model's layout (the experts
// it does not hold zero), its expert runs and its losses.
struct ExpertShardRank {
  std::vector<double> params;
  std::vector<GlobalRun> experts;
  std::vector<double> losses;
};

// A model with experts trained `steps` steps in float64 under `o`, running the experts of its rank
// of `experts`' group (all of them without one). Under ZeRO-3 the rank keeps its segment of each
// run of a kind (ExpertGradients::zero3_runs), and `params` holds those segments alone.
ExpertShardRank train_f64(TrainerOptions o, const std::vector<std::uint16_t>& data, int steps, ExpertGroup experts) {
  CpuBackend backend(1);
  const ExpertShard shard{experts.rank(), experts.shards()};
  std::unique_ptr<ShardedParameters> source;
  if (shards_parameters(o.data_parallel.zero_stage)) {
    const DataParallel& dp = o.data_parallel;
    const DataParallel alone{0, 1, dp.zero_stage};
    source = std::make_unique<ShardedParameters>(
        backend, GPT::parameter_units(with_experts(), shard), DType::f64,
        ExpertGradients::zero3_runs(ParameterLayout(with_experts(), shard).views(), experts.sharded(), dp,
                                    dp.expert_data ? *dp.expert_data : alone),
        true);
    o.data_parallel.sharded = source.get();
  }
  GPT model(with_experts(), backend, DType::f64, Recompute::none, source.get(), {}, experts);
  model.init_parameters(5);
  Trainer trainer(model, o, data, data);
  ExpertShardRank out;
  for (int i = 0; i < steps; ++i) out.losses.push_back(trainer.step().loss);
  out.params.assign(static_cast<std::size_t>(ParameterLayout(with_experts()).total()), 0.0);
  for (const GPTStage::Run& run : model.stage().global_runs())
    if (run.expert_shard) out.experts.push_back(run);
  // Each kept run of the rank's local layout, at its places in the whole model's.
  const double* p = model.params().data_as<double>();
  const std::vector<ParameterUnit> kept =
      source ? source->kept_runs() : std::vector<ParameterUnit>{{0, model.params().numel()}};
  for (const ParameterUnit& held : kept) {
    for (const GPTStage::Run& run : model.stage().global_runs()) {
      const std::int64_t from = std::max(held.begin, run.local), to = std::min(held.end, run.local + run.count);
      if (from < to)
        std::copy(p + (from - held.begin), p + (to - held.begin), out.params.begin() + run.global + (from - run.local));
    }
    p += held.size();
  }
  return out;
}

// `ranks` data-parallel threads in expert groups of `shards`, each holding only its experts. Dense
// buckets are summed over every rank, expert buckets over the ranks at the same place of every
// expert group (dp position % shards), each in rank order. Under ZeRO 1 to 3 the rank's dense runs
// are sharded over every rank and its expert runs over those ranks (under ZeRO-3 each unit's pieces
// gathered and reduce-scattered over the same groups).
std::vector<ExpertShardRank> run_expert_shards(const std::vector<std::uint16_t>& data, int steps, int ranks, int shards,
                                               ZeroStage zero_stage = ZeroStage::none) {
  const std::int64_t largest = ParameterLayout(with_experts()).total();
  std::vector<std::vector<double>> slots(static_cast<std::size_t>(ranks), std::vector<double>(largest));
  std::vector<double> scalar_slots(static_cast<std::size_t>(ranks));
  std::barrier sync(ranks);
  std::vector<std::unique_ptr<context::LocalContextGroup>> groups;
  for (int g = 0; g < ranks / shards; ++g) groups.push_back(std::make_unique<context::LocalContextGroup>(shards));
  std::vector<ExpertShardRank> out(static_cast<std::size_t>(ranks));
  auto rank_main = [&](int rank) {
    // Every rank writes its buffer to its slot; then each reads its group's (`members`, in
    // position order) at [offset, offset + numel).
    auto post = [&](const Tensor& buffer, std::int64_t offset) {
      std::memcpy(slots[rank].data() + offset, buffer.data_as<double>(), buffer.numel() * sizeof(double));
      sync.arrive_and_wait();
    };
    auto sum_over = [&](Tensor bucket, std::int64_t offset, const std::vector<int>& members) {
      post(bucket, offset);
      double* g = bucket.data_as<double>();
      for (std::int64_t i = 0; i < bucket.numel(); ++i) {
        double sum = 0;
        for (int r : members) sum += slots[r][offset + i];
        g[i] = sum;
      }
      sync.arrive_and_wait();
    };
    auto scalar_sum = [&](double x) {
      scalar_slots[rank] = x;
      sync.arrive_and_wait();
      double s = 0;
      for (double v : scalar_slots) s += v;
      sync.arrive_and_wait();
      return s;
    };
    // The hooks of the group `members` (this rank among them).
    auto group_of = [&](std::vector<int> members) {
      DataParallel g;
      g.size = static_cast<int>(members.size());
      g.rank = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
      g.zero_stage = zero_stage;
      // Any cut will do so long as the hooks agree: the trainer takes it from segment_of.
      const auto segment = [size = g.size](std::int64_t numel, int position) {
        return std::pair{numel * position / size, numel * (position + 1) / size};
      };
      g.segment_of = [segment, position = g.rank](std::int64_t numel) { return segment(numel, position); };
      g.start_sum = [sum_over, members](Tensor bucket, std::int64_t offset) { sum_over(bucket, offset, members); };
      g.wait_sums = [] {};
      g.reduce_scatter_gradients = [=, &slots, &sync](Tensor& grads) {
        post(grads, 0);
        const auto [begin, end] = segment(grads.numel(), g.rank);
        for (std::int64_t i = begin; i < end; ++i) {
          double sum = 0;
          for (int r : members) sum += slots[r][i];
          grads.data_as<double>()[i] = sum;
        }
        sync.arrive_and_wait();
      };
      g.all_gather_parameters = [=, &slots, &sync](Tensor& params) {
        post(params, 0);
        for (int p = 0; p < static_cast<int>(members.size()); ++p) {
          const auto [begin, end] = segment(params.numel(), p);
          std::copy(slots[members[p]].begin() + begin, slots[members[p]].begin() + end,
                    params.data_as<double>() + begin);
        }
        sync.arrive_and_wait();
      };
      g.sum = scalar_sum;
      g.mean = [scalar_sum, n = g.size](double x) { return scalar_sum(x) / n; };
      g.shards_of = [segment, size = g.size](std::int64_t numel) {
        std::vector<std::int64_t> offsets;
        for (int p = 0; p < size; ++p) offsets.push_back(segment(numel, p).first);
        offsets.push_back(numel);
        return offsets;
      };
      // A unit's piece: position p's part is counts[p] elements, in position order.
      g.unit_exchange.start_all_gather = [=, &slots, &sync](Tensor piece, std::vector<std::int64_t> counts) {
        post(piece, 0);
        std::int64_t at = 0;
        for (std::size_t p = 0; p < members.size(); ++p) {
          std::copy_n(slots[members[p]].begin() + at, counts[p], piece.data_as<double>() + at);
          at += counts[p];
        }
        sync.arrive_and_wait();
        return ShardExchange::Ticket{0};
      };
      g.unit_exchange.start_reduce_scatter = [=, &slots, &sync](Tensor piece, std::vector<std::int64_t> counts) {
        post(piece, 0);
        std::int64_t begin = 0;
        for (int p = 0; p < g.rank; ++p) begin += counts[static_cast<std::size_t>(p)];
        for (std::int64_t i = begin; i < begin + counts[static_cast<std::size_t>(g.rank)]; ++i) {
          double sum = 0;
          for (int r : members) sum += slots[r][i];
          piece.data_as<double>()[i] = sum;
        }
        sync.arrive_and_wait();
        return ShardExchange::Ticket{0};
      };
      g.unit_exchange.wait = [](ShardExchange::Ticket) {};
      return g;
    };
    std::vector<int> everyone, same_place;
    for (int r = 0; r < ranks; ++r) {
      everyone.push_back(r);
      if (r % shards == rank % shards) same_place.push_back(r);
    }
    TrainerOptions o = base_options();
    o.batch_size = 2;
    o.data_parallel = group_of(everyone);
    DataParallel& dp = o.data_parallel;
    if (ranks > shards) {
      dp.start_expert_sum = [&, same_place](Tensor bucket, std::int64_t offset) {
        sum_over(bucket, offset, same_place);
      };
      if (shards_optimizer_state(zero_stage)) dp.expert_data = std::make_shared<DataParallel>(group_of(same_place));
    }
    out[static_cast<std::size_t>(rank)] =
        train_f64(o, data, steps, ExpertGroup{&groups[static_cast<std::size_t>(rank / shards)]->rank(rank % shards)});
  };
  std::vector<std::thread> others;
  for (int r = 1; r < ranks; ++r) others.emplace_back(rank_main, r);
  rank_main(0);
  for (std::thread& t : others) t.join();
  return out;
}

}  // namespace

// Each rank holds its experts alone; together the first expert group holds every expert once, and
// every rank's dense parameters and its experts are those of one process accumulating the ranks'
// micro-batches, in float64 within 1e-10 (the experts' products run over other row groupings, and
// the sums in another order, so not bit for bit).
TEST_CASE(
    "with expert shards, ranks holding only their experts take the steps of one process accumulating their "
    "micro-batches, with ZeRO 0 to 3",
    "[model][dp][moe]") {
  const auto data = random_stream(40000, 64);
  const int steps = 3;
  const GPTConfig model = with_experts();
  for (const auto& [ranks, shards] : {std::pair{2, 2}, std::pair{4, 2}, std::pair{4, 4}}) {
    TrainerOptions accumulating = base_options();
    accumulating.batch_size = 2;
    accumulating.grad_accum = ranks;
    const ExpertShardRank reference = train_f64(accumulating, data, steps, {});
    std::vector<double> plain;
    for (ZeroStage stage : zero_stages) {
      INFO(ranks << " ranks in expert groups of " << shards << ", ZeRO " << zero_number(stage));
      const std::vector<ExpertShardRank> run = run_expert_shards(data, steps, ranks, shards, stage);
      // The first expert group's ranks cover the model once: rank 0's parameters with the others'
      // experts put in. Under ZeRO-3 every rank keeps its segments, each element on one rank: their sum.
      std::vector<double> joined = run[0].params;
      for (int r = 1; r < (shards_parameters(stage) ? ranks : shards); ++r) {
        const ExpertShardRank& rank = run[static_cast<std::size_t>(r)];
        if (shards_parameters(stage))
          for (std::size_t i = 0; i < joined.size(); ++i) joined[i] += rank.params[i];
        else
          for (const GlobalRun& experts : rank.experts)
            std::copy_n(rank.params.begin() + experts.global, experts.count, joined.begin() + experts.global);
      }
      std::int64_t held = 0;
      for (const GlobalRun& experts : run[0].experts) held += experts.count;
      CHECK(held * shards == model.moe_layers() * model.experts * (8 * 32 * 32 + 5 * 32));
      double max_diff = 0;
      for (std::size_t i = 0; i < reference.params.size(); ++i)
        max_diff = std::max(max_diff, std::abs(reference.params[i] - joined[i]));
      INFO("max parameter difference after " << steps << " steps " << max_diff);
      CHECK(max_diff < 1e-10);
      for (int r = 0; r < ranks; ++r) {
        // A rank at the same place of another expert group holds the same values, bit for bit.
        if (!shards_parameters(stage))
          CHECK(run[static_cast<std::size_t>(r)].params == run[static_cast<std::size_t>(r % shards)].params);
        for (int s = 0; s < steps; ++s)
          CHECK(std::abs(run[static_cast<std::size_t>(r)].losses[s] - reference.losses[s]) < 1e-10);
      }
      // ZeRO-1 sums every element as ZeRO 0 does and updates it once with the same moments.
      if (stage == ZeroStage::none) plain = joined;
      if (stage == ZeroStage::optimizer_state) CHECK(plain == joined);
    }
  }
}

// An in-place grow: one process accumulating 2 micro-batches takes 2 steps, a second rank joins with
// its parameters and moments, and both go on as 2 ranks of one micro-batch each: the weights are
// those of 2 ranks from the start, bit for bit.
TEST_CASE("a process of 2 micro-batches that a second rank joins mid-run takes, bit for bit, the steps of two ranks",
          "[model][dp][accumulation]") {
  const auto data = random_stream(40000, 64);
  const TwoRanks reference = run_two_ranks(data, 4, ZeroStage::none);
  const std::int64_t total = ParameterLayout(config).total();
  std::vector<float> slots[2] = {std::vector<float>(total), std::vector<float>(total)};
  double scalar_slots[2] = {0, 0};
  std::barrier sync(2);
  bool two_ranks = false;  // set before the second rank's thread starts
  auto sums = [&](int rank) {
    DataParallel dp;
    dp.rank = rank;
    dp.size = 2;
    dp.start_sum = [&, rank](Tensor bucket, std::int64_t offset) {
      std::memcpy(slots[rank].data() + offset, bucket.data_as<float>(), bucket.numel() * sizeof(float));
      sync.arrive_and_wait();
      float* g = bucket.data_as<float>();
      for (std::int64_t i = 0; i < bucket.numel(); ++i) g[i] = slots[0][offset + i] + slots[1][offset + i];
      sync.arrive_and_wait();
    };
    dp.wait_sums = [] {};
    dp.mean = [&, rank](double x) {
      if (!two_ranks) return x;
      scalar_slots[rank] = x;
      sync.arrive_and_wait();
      const double mean = (scalar_slots[0] + scalar_slots[1]) / 2;
      sync.arrive_and_wait();
      return mean;
    };
    return dp;
  };
  CpuBackend backend_first(1), backend_second(1);
  GPT first(config, backend_first, DType::f32, Recompute::none, nullptr);
  first.init_parameters(5);
  TrainerOptions alone = base_options();
  alone.batch_size = 2;
  alone.grad_accum = 2;
  alone.data_parallel = sums(0);
  alone.data_parallel.size = 1;
  Trainer first_trainer(first, alone, data, data);
  first_trainer.step();
  first_trainer.step();

  GPT second(config, backend_second, DType::f32, Recompute::none, nullptr);
  TrainerOptions joining = base_options();
  joining.batch_size = 2;
  joining.data_parallel = sums(1);
  Trainer second_trainer(second, joining, data, data);
  auto copy = [](const Tensor& from, Tensor& to) {
    std::memcpy(to.data_as<float>(), from.data_as<float>(), static_cast<std::size_t>(from.numel()) * sizeof(float));
  };
  copy(first.params(), second.params());
  copy(first_trainer.optimizer().first_moments(), second_trainer.optimizer().first_moments());
  copy(first_trainer.optimizer().second_moments(), second_trainer.optimizer().second_moments());
  second_trainer.resume_at(2);
  first_trainer.resplit({0, 2, 1, 2});
  CHECK(first_trainer.tokens_per_step() == second_trainer.tokens_per_step());
  two_ranks = true;
  std::thread other([&] {
    second_trainer.step();
    second_trainer.step();
  });
  first_trainer.step();
  first_trainer.step();
  other.join();
  const float* grown[2] = {first.params().data_as<float>(), second.params().data_as<float>()};
  for (const float* params : grown)
    CHECK(std::memcmp(params, reference.params[0].data(), static_cast<std::size_t>(total) * sizeof(float)) == 0);
}
