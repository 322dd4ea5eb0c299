// DiLoCo's outer step (compute/train/outer_step.hpp) on its own: the Nesterov arithmetic in f64
// against the formula written out, outer SGD with lr 1 and no momentum as the islands' average, and
// the one-process simulation of islands that the multi-process test (tests/apps/commands/
// test_diloco_run.cpp) compares a real run with.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/cuda/bf16.hpp"
#include "compute/random.hpp"
#include "compute/train/outer_step.hpp"
#include "compute/train/trainer.hpp"

using namespace troupe::compute;

namespace {

Tensor filled(std::int64_t n, std::uint64_t seed, double scale) {
  Tensor t = Tensor::zeros({n}, DType::f64);
  for (std::int64_t i = 0; i < n; ++i)
    t.data_as<double>()[i] = scale * (uniform_open0(hash_combine(seed, static_cast<std::uint64_t>(i))) - 0.5);
  return t;
}

}  // namespace

TEST_CASE("outer step: Nesterov over three syncs of three islands equals the formula in f64", "[diloco]") {
  constexpr std::int64_t n = 257;
  constexpr int k = 3;
  const double lr = 0.7, mu = 0.9;
  Tensor params = filled(n, 1, 2.0);
  OuterStep outer(params, {5, lr, mu});
  // The formula's own state, kept apart: w_sync and m per element.
  std::vector<double> w_sync(params.data_as<double>(), params.data_as<double>() + n), m(n, 0.0);
  for (int sync = 0; sync < 3; ++sync) {
    // Each island moved from the last sync by its own amount.
    std::vector<Tensor> island;
    Tensor summed = Tensor::zeros({n}, DType::f64);
    for (int i = 0; i < k; ++i) {
      island.push_back(filled(n, 100 + 10 * sync + i, 0.1));
      for (std::int64_t e = 0; e < n; ++e) island.back().data_as<double>()[e] += w_sync[e];
      outer.take_pseudo_gradient(0, island.back(), 5 * (sync + 1));
      for (std::int64_t e = 0; e < n; ++e) summed.data_as<double>()[e] += outer.pending(0).data_as<double>()[e];
    }
    // Where the step writes (island 0's weights, as a rank's own buffer), kept apart from the islands'.
    Tensor result = filled(n, 0, 0.0);
    std::copy_n(island[0].data_as<double>(), n, result.data_as<double>());
    outer.apply(0, result, summed, k, false);
    double worst = 0;
    for (std::int64_t e = 0; e < n; ++e) {
      double mean_weights = 0;
      for (int i = 0; i < k; ++i) mean_weights += island[i].data_as<double>()[e] / k;
      const double big_delta = w_sync[e] - mean_weights;
      m[e] = mu * m[e] + big_delta;
      const double expected = w_sync[e] - lr * big_delta - lr * mu * m[e];
      worst = std::max(worst, std::abs(result.data_as<double>()[e] - expected));
      w_sync[e] = expected;
    }
    INFO("sync " << sync);
    CHECK(worst < 1e-12);
    CHECK(std::abs(outer.momentum().data_as<double>()[7] - m[7]) < 1e-12);
    CHECK(outer.last_sync().data_as<double>()[7] == result.data_as<double>()[7]);
  }
  CHECK(outer.syncs() == 3);
}

TEST_CASE("simulated islands with one missing a sync: the average over those present equals the formula in f64",
          "[diloco]") {
  constexpr std::int64_t n = 64;
  constexpr int k = 3;
  const double lr = 0.7, mu = 0.9;
  const Tensor start = filled(n, 3, 1.0);
  // Island i's step s (from 0) adds its own amount to every weight.
  const auto moved = [](int island, long step) {
    return filled(n, 1000 + 10 * static_cast<std::uint64_t>(island) + static_cast<std::uint64_t>(step), 0.1);
  };
  // Syncs after steps 2 and 4; island 1 misses the second.
  const IslandsPresent missing = [](long steps_taken, int island) { return !(steps_taken == 4 && island == 1); };
  struct Run {
    std::vector<Tensor> params;
    std::vector<OuterStep> outer;
  };
  const auto simulate = [&](const IslandsPresent& present) {
    Run run;
    std::vector<long> taken(k, 0);
    std::vector<SimulatedIsland> islands;
    for (int i = 0; i < k; ++i) {
      Tensor p = filled(n, 0, 0.0);
      std::copy_n(start.data_as<double>(), n, p.data_as<double>());
      run.params.push_back(p);
      islands.push_back({[p, i, &taken, &moved]() mutable {
                           const Tensor d = moved(i, taken[static_cast<std::size_t>(i)]++);
                           for (std::int64_t e = 0; e < p.numel(); ++e)
                             p.data_as<double>()[e] += d.data_as<double>()[e];
                         },
                         p});
      run.outer.emplace_back(p, OuterOptions{2, lr, mu});
    }
    train_islands(islands, run.outer, 0, 4, present);
    return run;
  };
  // The formula: each island's weights after its steps, Δ over those present, Nesterov, and every
  // island (the absent one too) on w afterwards.
  std::vector<double> w_sync(start.data_as<double>(), start.data_as<double>() + n), m(n, 0.0);
  std::vector<std::vector<double>> w(k, w_sync);
  for (long sync_after : {2L, 4L}) {
    for (int i = 0; i < k; ++i)
      for (long s = sync_after - 2; s < sync_after; ++s) {
        const Tensor d = moved(i, s);
        for (std::int64_t e = 0; e < n; ++e) w[static_cast<std::size_t>(i)][e] += d.data_as<double>()[e];
      }
    for (std::int64_t e = 0; e < n; ++e) {
      double delta = 0;
      int here = 0;
      for (int i = 0; i < k; ++i)
        if (missing(sync_after, i)) {
          delta += w_sync[e] - w[static_cast<std::size_t>(i)][e];
          ++here;
        }
      delta /= here;
      m[e] = mu * m[e] + delta;
      w_sync[e] = w_sync[e] - lr * (delta + mu * m[e]);
      for (int i = 0; i < k; ++i) w[static_cast<std::size_t>(i)][e] = w_sync[e];
    }
  }
  Run run = simulate(missing);
  double worst = 0;
  for (int i = 0; i < k; ++i)
    for (std::int64_t e = 0; e < n; ++e) {
      worst = std::max(worst, std::abs(run.params[static_cast<std::size_t>(i)].data_as<double>()[e] - w_sync[e]));
      worst = std::max(worst, std::abs(run.outer[static_cast<std::size_t>(i)].momentum().data_as<double>()[e] - m[e]));
    }
  CHECK(worst < 1e-12);
  // The island that missed the sync goes on from the others' outer state and weights, exactly.
  const std::size_t bytes = run.params[0].nbytes();
  CHECK(std::memcmp(run.outer[1].last_sync().data(), run.outer[0].last_sync().data(), bytes) == 0);
  CHECK(std::memcmp(run.outer[1].momentum().data(), run.outer[0].momentum().data(), bytes) == 0);
  CHECK(std::memcmp(run.params[1].data(), run.params[0].data(), bytes) == 0);
  CHECK(run.outer[1].syncs() == 2);
  // Averaging all three gives other weights: the mask did leave island 1 out.
  Run all = simulate({});
  CHECK(std::abs(all.params[0].data_as<double>()[5] - run.params[0].data_as<double>()[5]) > 1e-6);
}

TEST_CASE(
    "simulated islands: an island absent from a sync restarts its inner optimizer once it took the outer "
    "weights, at each sync it misses and no other",
    "[diloco]") {
  constexpr std::int64_t n = 16;
  const Tensor start = filled(n, 7, 1.0);
  std::vector<Tensor> params;
  std::vector<OuterStep> outer;
  std::vector<SimulatedIsland> islands;
  // (island, steps taken by then, whether its weights were the outer weights) for every restart.
  std::vector<std::tuple<int, long, bool>> restarts;
  long taken = 0;
  for (int i = 0; i < 2; ++i) {
    Tensor p = filled(n, 0, 0.0);
    std::copy_n(start.data_as<double>(), n, p.data_as<double>());
    params.push_back(p);
    outer.emplace_back(p, OuterOptions{2, 0.7, 0.9});
  }
  for (int i = 0; i < 2; ++i)
    islands.push_back({[p = params[static_cast<std::size_t>(i)], i, &taken]() mutable {
                         const Tensor d = filled(n, 50 + static_cast<std::uint64_t>(10 * i + taken), 0.1);
                         for (std::int64_t e = 0; e < n; ++e) p.data_as<double>()[e] += d.data_as<double>()[e];
                         if (i == 1) ++taken;
                       },
                       params[static_cast<std::size_t>(i)],
                       [&, i] {
                         const Tensor& p = params[static_cast<std::size_t>(i)];
                         restarts.emplace_back(i, taken,
                                               std::memcmp(p.data(), outer[0].last_sync().data(), p.nbytes()) == 0);
                       }});
  // Syncs after steps 2, 4 and 6; island 1 misses those after 2 and 6.
  train_islands(islands, outer, 0, 6, [](long s, int island) { return island == 0 || s == 4; });
  CHECK(restarts == std::vector<std::tuple<int, long, bool>>{{1, 2, true}, {1, 6, true}});
}

TEST_CASE("outer step: lr 1 without momentum gives the islands' weights averaged", "[diloco]") {
  constexpr std::int64_t n = 100;
  Tensor start = filled(n, 2, 1.0);
  OuterStep outer(start, {1, 1.0, 0.0});
  Tensor a = filled(n, 3, 1.0), b = filled(n, 4, 1.0), summed = Tensor::zeros({n}, DType::f64);
  outer.take_pseudo_gradient(0, a, 1);
  std::copy_n(outer.pending(0).data_as<double>(), n, summed.data_as<double>());
  outer.take_pseudo_gradient(0, b, 1);
  for (std::int64_t e = 0; e < n; ++e) summed.data_as<double>()[e] += outer.pending(0).data_as<double>()[e];
  outer.apply(0, a, summed, 2, false);
  double worst = 0;
  for (std::int64_t e = 0; e < n; ++e) {
    const double average = (filled(n, 3, 1.0).data_as<double>()[e] + b.data_as<double>()[e]) / 2;
    worst = std::max(worst, std::abs(a.data_as<double>()[e] - average));
  }
  CHECK(worst < 1e-15);
}

// The fragments synced (started, then landed) after each step of `total`, as "s:f" pairs, the
// schedule run on its own (no islands: each started sum lands as the schedule says).
std::vector<std::string> schedule(OuterStep& outer, long total) {
  std::vector<std::string> out;
  Tensor params = Tensor::zeros({outer.last_sync().numel()}, DType::f32);
  for (long s = 1; s <= total; ++s)
    for (int f : outer.after_step(s, total, params, IslandGroup{}))
      out.push_back(std::to_string(s) + ":" + std::to_string(f));
  return out;
}

TEST_CASE("outer step: one fragment syncs every H steps and after the last", "[diloco]") {
  OuterStep outer(Tensor::zeros({1}, DType::f32), {4, 0.7, 0.9});
  CHECK(schedule(outer, 10) == std::vector<std::string>{"4:0", "8:0", "10:0"});
  CHECK(outer.syncs() == 3);
}

TEST_CASE("outer step: fragments sync staggered, land d steps later, and all end on the last step", "[diloco]") {
  // Three fragments of 6 elements, H 6: offsets 0, 2, 4.
  std::vector<OuterFragment> fragments{{0, 2, 0}, {2, 4, 2}, {4, 6, 4}};
  OuterOptions options{6, 0.7, 0.9, OuterPrecision::f32, fragments, 0};
  OuterStep plain(Tensor::zeros({6}, DType::f32), options);
  CHECK(schedule(plain, 13) ==
        std::vector<std::string>{"2:1", "4:2", "6:0", "8:1", "10:2", "12:0", "13:0", "13:1", "13:2"});
  options.overlap = 1;
  OuterStep overlapped(Tensor::zeros({6}, DType::f32), options);
  // Started after 2, 4, 6, ...; landed a step later; the one started after 12 lands early, at the end.
  CHECK(schedule(overlapped, 13) ==
        std::vector<std::string>{"3:1", "5:2", "7:0", "9:1", "11:2", "13:0", "13:1", "13:2"});
}

TEST_CASE("outer step: the next sync is the next fragment's scheduled step, or the last step", "[diloco]") {
  std::vector<OuterFragment> fragments{{0, 2, 0}, {2, 4, 2}, {4, 6, 4}};
  const OuterStep outer(Tensor::zeros({6}, DType::f32), {6, 0.7, 0.9, OuterPrecision::f32, fragments, 0});
  // Offsets 0, 2, 4 of H 6 over 13 steps: syncs after 2, 4, 6, 8, 10, 12, then the last, 13.
  CHECK(outer.next_sync(0, 13) == 2);
  CHECK(outer.next_sync(2, 13) == 4);
  CHECK(outer.next_sync(5, 13) == 6);
  CHECK(outer.next_sync(11, 13) == 12);
  CHECK(outer.next_sync(12, 13) == 13);
  CHECK(outer.next_sync(13, 13) == 0);
  const OuterStep whole(Tensor::zeros({1}, DType::f32), {4, 0.7, 0.9});
  CHECK(whole.next_sync(0, 10) == 4);
  CHECK(whole.next_sync(4, 10) == 8);
  CHECK(whole.next_sync(8, 10) == 10);
}

TEST_CASE("outer step: a caller that stops stepping lands the sum in flight at once, mixed as a late landing",
          "[diloco]") {
  std::vector<OuterFragment> fragments{{0, 2, 0}, {2, 4, 2}};
  OuterStep outer(Tensor::zeros({4}, DType::f32), {4, 1.0, 0.0, OuterPrecision::f32, fragments, 1});
  Tensor params = Tensor::zeros({4}, DType::f32);
  CHECK(outer.after_step(1, 100, params, IslandGroup{}).empty());
  // Fragment 1 (elements 2, 3) starts after step 2 with its weight 2 at −1: Δ = 0 − (−1) = 1, so
  // the outer step (lr 1, no momentum) gives w = 0 − 1 = −1. The weight moves on to 3 meanwhile.
  params.data_as<float>()[2] = -1.0f;
  CHECK(outer.after_step(2, 100, params, IslandGroup{}).empty());
  params.data_as<float>()[2] = 3.0f;
  CHECK(outer.land_in_flight(params, IslandGroup{}) == std::vector<int>{1});
  CHECK(params.data_as<float>()[2] == 1.0f);  // ½·3 + ½·(−1)
  CHECK(outer.last_sync().data_as<float>()[2] == -1.0f);
  CHECK(outer.land_in_flight(params, IslandGroup{}).empty());
  CHECK(outer.syncs() == 1);
}

TEST_CASE("outer fragments: consecutive blocks, the embeddings first and the tail last, offsets H/F apart",
          "[diloco]") {
  // units: embeddings, 5 blocks, tail.
  const std::vector<ParameterUnit> units{{0, 10}, {10, 13}, {13, 16}, {16, 19}, {19, 22}, {22, 25}, {25, 27}};
  const std::vector<OuterFragment> f = outer_fragments(units, 2, 20);
  REQUIRE(f.size() == 2);
  // 5 blocks in 2: three, then two.
  CHECK((f[0].begin == 0 && f[0].end == 19 && f[0].offset == 0));
  CHECK((f[1].begin == 19 && f[1].end == 27 && f[1].offset == 10));
  const std::vector<OuterFragment> one = outer_fragments(units, 1, 20);
  CHECK((one.size() == 1 && one[0].begin == 0 && one[0].end == 27));
  CHECK(outer_fragments(units, 5, 7).back().offset == 4);
  // A shard of the buffer, [15, 27): the first fragment's last 4 values and the whole second, counted
  // from the shard's start; a shard inside one fragment leaves the other empty, on its schedule.
  const std::vector<OuterFragment> shard = fragments_within(f, 15, 27);
  REQUIRE(shard.size() == 2);
  CHECK((shard[0].begin == 0 && shard[0].end == 4 && shard[0].offset == 0));
  CHECK((shard[1].begin == 4 && shard[1].end == 12 && shard[1].offset == 10));
  // Two stages of the same model: blocks 0-1 after the embeddings; blocks 2-4, ln_f (3 values) and
  // the copy of wte (10 values). The copy is one more run, on fragment 0's schedule.
  const std::vector<ParameterUnit> first{{0, 10}, {10, 13}, {13, 16}};
  const std::vector<OuterFragment> front = stage_fragments(first, 0, 2, 5, 0, 2, 20);
  REQUIRE(front.size() == 2);
  CHECK((front[0].begin == 0 && front[0].end == 16 && front[0].offset == 0));
  CHECK((front[1].begin == 16 && front[1].end == 16 && front[1].offset == 10));
  const std::vector<ParameterUnit> last{{0, 3}, {3, 6}, {6, 9}, {9, 22}};
  const std::vector<OuterFragment> back = stage_fragments(last, 2, 5, 5, 10, 2, 20);
  REQUIRE(back.size() == 3);
  CHECK((back[0].begin == 0 && back[0].end == 3 && back[0].offset == 0));
  CHECK((back[1].begin == 3 && back[1].end == 12 && back[1].offset == 10));
  CHECK((back[2].begin == 12 && back[2].end == 22 && back[2].offset == 0));
  // Each run names the model fragment it is part of: the copy of the embedding is fragment 0's.
  CHECK((front[0].fragment == 0 && front[1].fragment == 1));
  CHECK((back[0].fragment == 0 && back[1].fragment == 1 && back[2].fragment == 0));
  const std::vector<OuterFragment> whole_stage = stage_fragments(last, 2, 5, 5, 10, 1, 20);
  CHECK((whole_stage.size() == 1 && whole_stage[0].begin == 0 && whole_stage[0].end == 22));
  const std::vector<OuterFragment> inside = fragments_within(f, 0, 15);
  CHECK((inside[0].begin == 0 && inside[0].end == 15));
  CHECK((inside[1].begin == 15 && inside[1].end == 15 && inside[1].offset == 10 && inside[1].fragment == 1));
}

TEST_CASE("outer step: an empty fragment syncs on its schedule without a sum, the others as the whole buffer's",
          "[diloco]") {
  // Island 0 of 2 holding a shard that has none of fragment 1: its sums are fragment 0's alone.
  Tensor params = Tensor::zeros({4}, DType::f32);
  std::fill_n(params.data_as<float>(), 4, 1.0f);
  OuterStep outer(params, OuterOptions{2, 1.0, 0.0, OuterPrecision::f32, {{0, 4, 0}, {4, 4, 1}}});
  int started = 0, waited = 0;
  IslandGroup group{2,
                    0,
                    [&](Tensor sum, long) {
                      ++started;
                      CHECK(sum.numel() == 4);
                      std::fill_n(sum.data_as<float>(), 4, 0.5f);  // the islands' pseudo-gradients summed
                    },
                    [&] {
                      ++waited;
                      return 2;
                    },
                    {}};
  CHECK(outer.after_step(1, 4, params, group) == std::vector<int>{1});
  CHECK((started == 0 && waited == 0));
  CHECK(outer.after_step(2, 4, params, group) == std::vector<int>{0});
  CHECK((started == 1 && waited == 1));
  // lr 1, no momentum: the weights at the last sync less the mean pseudo-gradient, 1 - 0.5 / 2.
  CHECK(params.data_as<float>()[0] == 0.75f);
  CHECK(outer.syncs() == 2);
}

namespace {

// Two islands one step from the same start, to `a` and `b`, then one outer step at lr 1 without
// momentum (each pseudo-gradient one block of 3 values); every island's weights after it.
const std::vector<float> start{1.0f, -2.0f, 0.5f}, a{1.001f, -2.0004f, 0.49f}, b{0.9993f, -1.9991f, 0.5071f};

std::vector<Tensor> two_islands_one_sync(OuterPrecision precision) {
  std::vector<Tensor> weights;
  std::vector<SimulatedIsland> islands;
  std::vector<OuterStep> outer;
  const std::vector<float>* moved[] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    weights.push_back(Tensor::zeros({3}, DType::f32));
    std::copy(start.begin(), start.end(), weights.back().data_as<float>());
    outer.emplace_back(weights.back(), OuterOptions{1, 1.0, 0.0, precision});
  }
  for (int i = 0; i < 2; ++i)
    islands.push_back(
        {[w = weights[i], to = moved[i]]() mutable { std::copy(to->begin(), to->end(), w.data_as<float>()); },
         weights[i]});
  train_islands(islands, outer, 0, 1);
  return weights;
}

}  // namespace

TEST_CASE("outer step: bf16 pseudo-gradients are summed as the bf16 ring adds them", "[diloco]") {
  // The two islands' sum rounded term by term and once more.
  const std::vector<Tensor> weights = two_islands_one_sync(OuterPrecision::bf16);
  for (int e = 0; e < 3; ++e) {
    const float sum = round_to_bf16(round_to_bf16(start[e] - a[e]) + round_to_bf16(start[e] - b[e]));
    const float expected = start[e] - 1.0f * (sum / 2.0f + 0.0f * 0.0f);
    CHECK(weights[0].data_as<float>()[e] == expected);
    CHECK(weights[1].data_as<float>()[e] == expected);
    // Not the f32 average: the rounding shows.
    CHECK(expected != start[e] - ((start[e] - a[e]) + (start[e] - b[e])) / 2.0f);
  }
}

TEST_CASE("outer step: int8 pseudo-gradients are decoded and added in island order", "[diloco]") {
  const std::vector<Tensor> weights = two_islands_one_sync(OuterPrecision::int8);
  // Each island's Δ on its own block scale, the largest magnitude over 127, rounded to a step of it.
  auto decoded = [&](const std::vector<float>& moved_to, int e) {
    float largest = 0.0f;
    for (int j = 0; j < 3; ++j) largest = std::max(largest, std::fabs(start[j] - moved_to[j]));
    const float scale = largest / 127.0f;
    return std::nearbyint((start[e] - moved_to[e]) / scale) * scale;
  };
  for (int e = 0; e < 3; ++e) {
    const float expected = start[e] - 1.0f * ((decoded(a, e) + decoded(b, e)) / 2.0f + 0.0f * 0.0f);
    CHECK(weights[0].data_as<float>()[e] == expected);
    CHECK(weights[1].data_as<float>()[e] == expected);
  }
  // Not the f32 average: the rounding shows in the smallest element of a's block.
  CHECK(weights[0].data_as<float>()[0] != start[0] - ((start[0] - a[0]) + (start[0] - b[0])) / 2.0f);
}

TEST_CASE("simulated islands at H 1, lr 1, no momentum: every step's weights are the islands' average", "[diloco]") {
  const GPTConfig config{2, 32, 4, 32, 64, 64};
  std::vector<std::uint16_t> data(4096);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint16_t>(hash_combine(17, i) % 64);
  CpuBackend backend(1);
  TrainerOptions o;
  o.seq_len = 32;
  o.batch_size = 2;
  o.lr = {1e-3, 1e-4, 1, 4};
  o.islands = 2;
  constexpr long steps = 3;
  // The simulation: two islands, the outer step averaging them after every step.
  std::vector<std::unique_ptr<GPT>> models;
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<SimulatedIsland> islands;
  std::vector<OuterStep> outer;
  // By hand: the same two trainers, their weights averaged after every step.
  std::vector<std::unique_ptr<GPT>> hand_models;
  std::vector<std::unique_ptr<Trainer>> hand;
  for (int i = 0; i < 2; ++i) {
    o.island = i;
    for (auto* set : {&models, &hand_models}) {
      set->push_back(std::make_unique<GPT>(config, backend, DType::f32));
      set->back()->init_parameters(5);
    }
    trainers.push_back(std::make_unique<Trainer>(*models.back(), o, data, data));
    hand.push_back(std::make_unique<Trainer>(*hand_models.back(), o, data, data));
    islands.push_back({[t = trainers.back().get()] { t->step(); }, models.back()->params()});
    outer.emplace_back(models.back()->params(), OuterOptions{1, 1.0, 0.0});
  }
  train_islands(islands, outer, 0, steps);
  const std::int64_t n = models[0]->params().numel();
  for (long s = 0; s < steps; ++s) {
    for (auto& t : hand) t->step();
    float* a = hand_models[0]->params().data_as<float>();
    float* b = hand_models[1]->params().data_as<float>();
    for (std::int64_t e = 0; e < n; ++e) a[e] = b[e] = (a[e] + b[e]) / 2;
  }
  double worst = 0, moved = 0;
  std::int64_t islands_apart = 0;
  const float* sim0 = models[0]->params().data_as<float>();
  const float* sim1 = models[1]->params().data_as<float>();
  const float* by_hand = hand_models[0]->params().data_as<float>();
  GPT fresh(config, backend, DType::f32);
  fresh.init_parameters(5);
  for (std::int64_t e = 0; e < n; ++e) {
    islands_apart += sim0[e] != sim1[e];
    worst = std::max(worst, double(std::abs(sim0[e] - by_hand[e])));
    moved = std::max(moved, double(std::abs(sim0[e] - fresh.params().data_as<float>()[e])));
  }
  CHECK(islands_apart == 0);
  CHECK(moved > 1e-4);  // the steps did move the weights
  CHECK(worst < 1e-6);  // the outer step's w_sync − mean(w_sync − w_i) rounds apart from mean(w_i)
}
