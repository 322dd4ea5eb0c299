#include "compute/train/outer_step.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "compute/check.hpp"
#include "compute/cuda/bf16.hpp"
#include "compute/memory_ledger.hpp"
#include "compute/train/int8_blocks.hpp"

namespace troupe::compute {
namespace {

Tensor copy_of(const Tensor& t) {
  Tensor out = Tensor::zeros(t.shape(), t.dtype());
  std::memcpy(out.data(), t.data(), t.nbytes());
  return out;
}

template <typename T>
void subtract(const T* a, const T* b, T* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] - b[i];
}

// The Nesterov step of the header; `mix`: the weights become the half-and-half mix of the local
// weights and the stepped ones.
template <typename T>
void nesterov(T* params, T* last_sync, T* momentum, const T* summed, std::int64_t n, int islands, double lr, double mu,
              bool mix) {
  const T k = static_cast<T>(islands), rate = static_cast<T>(lr), m = static_cast<T>(mu), half = T(0.5);
  for (std::int64_t i = 0; i < n; ++i) {
    const T delta = summed[i] / k;
    momentum[i] = m * momentum[i] + delta;
    last_sync[i] = last_sync[i] - rate * (delta + m * momentum[i]);
    params[i] = mix ? half * params[i] + half * last_sync[i] : last_sync[i];
  }
}

// sum += next in the simulation's island order; under bf16 each term and each partial sum rounded
// to bf16 first (compute/cuda/bf16.hpp), as the bf16 wire and its ring's f32 adds round them.
template <typename T>
void add_pseudo_gradient(T* sum, const T* next, std::int64_t n, bool first, bool bf16) {
  for (std::int64_t i = 0; i < n; ++i) {
    T value = first ? next[i] : sum[i] + (bf16 ? static_cast<T>(round_to_bf16(static_cast<float>(next[i]))) : next[i]);
    sum[i] = bf16 ? static_cast<T>(round_to_bf16(static_cast<float>(value))) : value;
  }
}

void check_host(const Tensor& t, const char* what) {
  TROUPE_CHECK(t.device() == Device::cpu && (t.dtype() == DType::f32 || t.dtype() == DType::f64),
               std::string("outer step: ") + what + " is not f32 or f64 host memory");
}

}  // namespace

OuterStep::OuterStep(const Tensor& params, OuterOptions options) : options_(std::move(options)) {
  TROUPE_CHECK(options_.every >= 1, "outer step: every H must be at least 1");
  check_host(params, "the parameters");
  TROUPE_CHECK(options_.precision == OuterPrecision::f32 || params.dtype() == DType::f32,
               "outer step: bf16 or int8 pseudo-gradients of f32 parameters only");
  if (options_.fragments.empty()) options_.fragments = {{0, params.numel(), 0}};
  std::int64_t next = 0;
  for (const OuterFragment& f : options_.fragments) {
    TROUPE_CHECK(f.begin == next && f.end >= f.begin && f.offset >= 0,
                 "outer step: fragments not covering the buffer in order");
    next = f.end;
  }
  TROUPE_CHECK(next == params.numel(), "outer step: fragments of another buffer");
  TROUPE_CHECK(options_.overlap >= 0 && options_.overlap < options_.every, "outer step: an overlap of H steps or more");
  started_at_.assign(options_.fragments.size(), -1);
  MemoryScope scope(MemoryKind::optimizer_state);
  last_sync_ = copy_of(params);
  momentum_ = Tensor::zeros(params.shape(), params.dtype());
  delta_ = Tensor::zeros(params.shape(), params.dtype());
}

std::vector<int> OuterStep::landing(long steps_taken, long total_steps) const {
  std::vector<int> out;
  for (std::size_t f = 0; f < started_at_.size(); ++f)
    if (started_at_[f] >= 0 && (started_at_[f] + options_.overlap == steps_taken || steps_taken == total_steps))
      out.push_back(static_cast<int>(f));
  return out;
}

std::vector<int> OuterStep::starting(long steps_taken, long total_steps) const {
  std::vector<int> out;
  for (std::size_t f = 0; f < started_at_.size(); ++f)
    if (started_at_[f] < 0 &&
        (steps_taken == total_steps || scheduled(options_.fragments[f], options_.every, steps_taken)))
      out.push_back(static_cast<int>(f));
  return out;
}

bool OuterStep::lands_at_once(long steps_taken, long total_steps) const {
  return options_.overlap == 0 || steps_taken == total_steps;
}

long OuterStep::next_sync(long steps_taken, long total_steps) const {
  // Every fragment is scheduled once in any H consecutive steps: at most H looked at.
  for (long s = steps_taken + 1; s < total_steps; ++s)
    for (const OuterFragment& f : options_.fragments)
      if (scheduled(f, options_.every, s)) return s;
  return steps_taken < total_steps ? total_steps : 0;
}

Tensor OuterStep::pending(int fragment) const {
  const OuterFragment& f = options_.fragments.at(static_cast<std::size_t>(fragment));
  return delta_.slice(f.begin, {f.size()});
}

void OuterStep::take_pseudo_gradient(int fragment, const Tensor& params, long steps_taken) {
  TROUPE_CHECK(params.numel() == last_sync_.numel() && params.dtype() == last_sync_.dtype(),
               "outer step: a pseudo-gradient of other parameters");
  const OuterFragment& f = options_.fragments[static_cast<std::size_t>(fragment)];
  if (params.dtype() == DType::f64)
    subtract(last_sync_.data_as<double>() + f.begin, params.data_as<double>() + f.begin,
             delta_.data_as<double>() + f.begin, f.size());
  else
    subtract(last_sync_.data_as<float>() + f.begin, params.data_as<float>() + f.begin,
             delta_.data_as<float>() + f.begin, f.size());
  started_at_[static_cast<std::size_t>(fragment)] = steps_taken;
}

void OuterStep::apply(int fragment, Tensor& params, const Tensor& summed, int islands, bool mix) {
  TROUPE_CHECK(islands >= 1, "outer step: no islands");
  const OuterFragment& f = options_.fragments.at(static_cast<std::size_t>(fragment));
  TROUPE_CHECK(params.numel() == last_sync_.numel() && summed.numel() == f.size() &&
                   params.dtype() == last_sync_.dtype() && summed.dtype() == last_sync_.dtype(),
               "outer step: a sum of other parameters");
  if (params.dtype() == DType::f64)
    nesterov(params.data_as<double>() + f.begin, last_sync_.data_as<double>() + f.begin,
             momentum_.data_as<double>() + f.begin, summed.data_as<double>(), f.size(), islands, options_.lr,
             options_.momentum, mix);
  else
    nesterov(params.data_as<float>() + f.begin, last_sync_.data_as<float>() + f.begin,
             momentum_.data_as<float>() + f.begin, summed.data_as<float>(), f.size(), islands, options_.lr,
             options_.momentum, mix);
  started_at_[static_cast<std::size_t>(fragment)] = -1;
  ++syncs_;
}

// An empty fragment (a shard holding none of it, outer_fragments.hpp) is synced without a sum:
// every rank that pairs with this one over the islands holds none of it either.
bool OuterStep::sums(int fragment, const IslandGroup& group) const {
  return group.count > 1 && options_.fragments[static_cast<std::size_t>(fragment)].size() > 0;
}

void OuterStep::land(const std::vector<int>& runs, Tensor& params, const IslandGroup& group, bool mix) {
  int islands = group.count;
  for (int r : runs)
    if (sums(r, group)) islands = group.wait_sum();
  if (group.count > 1 && group.agree) islands = group.agree();
  last_islands_ = islands;
  for (int r : runs) apply(r, params, pending(r), islands, mix);
}

std::vector<std::vector<int>> OuterStep::by_fragment(const std::vector<int>& runs) const {
  std::vector<std::vector<int>> groups;
  std::vector<int> fragment_of_group;
  for (int r : runs) {
    const int fragment = options_.fragments[static_cast<std::size_t>(r)].fragment;
    const auto at = std::find(fragment_of_group.begin(), fragment_of_group.end(), fragment);
    if (at != fragment_of_group.end()) {
      groups[static_cast<std::size_t>(at - fragment_of_group.begin())].push_back(r);
      continue;
    }
    fragment_of_group.push_back(fragment);
    groups.push_back({r});
  }
  return groups;
}

std::vector<int> OuterStep::after_step(long steps_taken, long total_steps, Tensor& params, const IslandGroup& group) {
  TROUPE_CHECK(group.count == 1 || (group.start_sum && group.wait_sum), "outer step: islands without their sum");
  if (group.between_steps) group.between_steps();
  std::vector<int> landed = landing(steps_taken, total_steps);
  const std::vector<int> started = starting(steps_taken, total_steps);
  for (const std::vector<int>& runs : by_fragment(landed)) land(runs, params, group, true);
  const bool at_once = lands_at_once(steps_taken, total_steps);
  for (const std::vector<int>& runs : by_fragment(started)) {
    for (int f : runs) {
      take_pseudo_gradient(f, params, steps_taken);
      if (sums(f, group)) group.start_sum(pending(f), steps_taken);
    }
    if (!at_once) continue;
    land(runs, params, group, false);
    landed.insert(landed.end(), runs.begin(), runs.end());
  }
  if (group.synced && !landed.empty()) group.synced(steps_taken, last_sync_, momentum_);
  return landed;
}

void OuterStep::adopt(int fragment, const OuterStep& peer, Tensor& params) {
  const OuterFragment& f = options_.fragments.at(static_cast<std::size_t>(fragment));
  TROUPE_CHECK(params.numel() == last_sync_.numel() && params.dtype() == last_sync_.dtype() &&
                   peer.last_sync_.numel() == last_sync_.numel() && peer.last_sync_.dtype() == last_sync_.dtype(),
               "outer step: the outer state of other parameters");
  const std::size_t offset = static_cast<std::size_t>(f.begin) * dtype_size(last_sync_.dtype());
  const std::size_t bytes = static_cast<std::size_t>(f.size()) * dtype_size(last_sync_.dtype());
  std::memcpy(static_cast<std::byte*>(last_sync_.data()) + offset,
              static_cast<const std::byte*>(peer.last_sync_.data()) + offset, bytes);
  std::memcpy(static_cast<std::byte*>(momentum_.data()) + offset,
              static_cast<const std::byte*>(peer.momentum_.data()) + offset, bytes);
  std::memcpy(static_cast<std::byte*>(params.data()) + offset,
              static_cast<const std::byte*>(peer.last_sync_.data()) + offset, bytes);
  started_at_[static_cast<std::size_t>(fragment)] = -1;
  ++syncs_;
}

std::vector<int> OuterStep::land_in_flight(Tensor& params, const IslandGroup& group) {
  std::vector<int> landed;
  for (std::size_t f = 0; f < started_at_.size(); ++f)
    if (started_at_[f] >= 0) landed.push_back(static_cast<int>(f));
  for (const std::vector<int>& runs : by_fragment(landed)) land(runs, params, group, true);
  return landed;
}

void train_islands(std::span<SimulatedIsland> islands, std::span<OuterStep> outer, long steps_taken, long steps,
                   const IslandsPresent& present) {
  TROUPE_CHECK(!islands.empty() && islands.size() == outer.size(), "simulated islands: one outer state per island");
  const int k = static_cast<int>(islands.size());
  const Tensor& first = islands.front().params;
  const OuterPrecision precision = k > 1 ? outer.front().options().precision : OuterPrecision::f32;
  MemoryScope scope(MemoryKind::optimizer_state);
  Tensor sum_buffer = Tensor::zeros(first.shape(), first.dtype());
  std::vector<std::byte> payload;  // one island's pseudo-gradient as int8 blocks
  // Σ_i over the islands present in island order, ((Δ_0 + Δ_1) + Δ_2) + ..., then every present
  // island's outer step on fragment f, divided by the count present; the absent adopt the result.
  auto land = [&](int f, bool mix, long s) {
    const OuterFragment& fragment = outer.front().fragments()[static_cast<std::size_t>(f)];
    Tensor sum = sum_buffer.slice(fragment.begin, {fragment.size()});
    std::vector<int> here;
    for (int i = 0; i < k; ++i)
      if (!present || present(s, i)) here.push_back(i);
    TROUPE_CHECK(!here.empty(), "simulated islands: a sync without an island present");
    for (int i : here) {
      const bool first = i == here.front();
      const Tensor next = outer[static_cast<std::size_t>(i)].pending(f);
      if (precision == OuterPrecision::int8) {
        payload.resize(static_cast<std::size_t>(int8_blocks_bytes(sum.numel())));
        encode_int8_blocks(next.data_as<float>(), sum.numel(), payload.data());
        add_int8_blocks(payload.data(), sum.numel(), sum.data_as<float>(), first);
      } else if (sum.dtype() == DType::f64) {
        add_pseudo_gradient(sum.data_as<double>(), next.data_as<double>(), sum.numel(), first,
                            precision == OuterPrecision::bf16);
      } else {
        add_pseudo_gradient(sum.data_as<float>(), next.data_as<float>(), sum.numel(), first,
                            precision == OuterPrecision::bf16);
      }
    }
    const int count = static_cast<int>(here.size());
    for (int i : here)
      outer[static_cast<std::size_t>(i)].apply(f, islands[static_cast<std::size_t>(i)].params, sum, count, mix);
    // An island absent takes the whole outer state, every fragment's, as a lost island's new process
    // does when it rejoins.
    for (int i = 0; i < k; ++i)
      if (!std::binary_search(here.begin(), here.end(), i)) {
        SimulatedIsland& absent = islands[static_cast<std::size_t>(i)];
        OuterStep& its = outer[static_cast<std::size_t>(i)];
        for (std::size_t g = 0; g < its.fragments().size(); ++g)
          its.adopt(static_cast<int>(g), outer[static_cast<std::size_t>(here.front())], absent.params);
        if (absent.restart_inner) absent.restart_inner();
      }
  };
  for (long s = steps_taken; s < steps; ++s) {
    for (SimulatedIsland& island : islands) island.step();
    const OuterStep& plan = outer.front();
    const std::vector<int> landed = plan.landing(s + 1, steps), started = plan.starting(s + 1, steps);
    const bool at_once = plan.lands_at_once(s + 1, steps);
    for (int f : landed) land(f, true, s + 1);
    for (int f : started) {
      for (int i = 0; i < k; ++i)
        outer[static_cast<std::size_t>(i)].take_pseudo_gradient(f, islands[static_cast<std::size_t>(i)].params, s + 1);
      if (at_once) land(f, false, s + 1);
    }
  }
}

}  // namespace troupe::compute
