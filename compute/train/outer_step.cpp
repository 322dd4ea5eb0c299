#include "compute/train/outer_step.hpp"

#include <cstring>
#include <string>

#include "compute/check.hpp"
#include "compute/memory_ledger.hpp"

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

template <typename T>
void nesterov(T* params, T* last_sync, T* momentum, const T* summed, std::int64_t n, int islands, double lr,
              double mu) {
  const T k = static_cast<T>(islands), rate = static_cast<T>(lr), m = static_cast<T>(mu);
  for (std::int64_t i = 0; i < n; ++i) {
    const T delta = summed[i] / k;
    momentum[i] = m * momentum[i] + delta;
    params[i] = last_sync[i] - rate * (delta + m * momentum[i]);
    last_sync[i] = params[i];
  }
}

void check_host(const Tensor& t, const char* what) {
  TROUPE_CHECK(t.device() == Device::cpu && (t.dtype() == DType::f32 || t.dtype() == DType::f64),
               std::string("outer step: ") + what + " is not f32 or f64 host memory");
}

}  // namespace

OuterStep::OuterStep(const Tensor& params, OuterOptions options) : options_(options) {
  TROUPE_CHECK(options.every >= 1, "outer step: every H must be at least 1");
  check_host(params, "the parameters");
  MemoryScope scope(MemoryKind::optimizer_state);
  last_sync_ = copy_of(params);
  momentum_ = Tensor::zeros(params.shape(), params.dtype());
  delta_ = Tensor::zeros(params.shape(), params.dtype());
}

bool OuterStep::due(long steps_taken, long total_steps) const {
  return steps_taken % options_.every == 0 || steps_taken == total_steps;
}

void OuterStep::pseudo_gradient(const Tensor& params, Tensor& delta) const {
  TROUPE_CHECK(params.numel() == last_sync_.numel() && delta.numel() == last_sync_.numel() &&
                   params.dtype() == last_sync_.dtype() && delta.dtype() == last_sync_.dtype(),
               "outer step: a pseudo-gradient of other parameters");
  if (params.dtype() == DType::f64)
    subtract(last_sync_.data_as<double>(), params.data_as<double>(), delta.data_as<double>(), params.numel());
  else
    subtract(last_sync_.data_as<float>(), params.data_as<float>(), delta.data_as<float>(), params.numel());
}

void OuterStep::apply(Tensor& params, const Tensor& summed, int islands) {
  TROUPE_CHECK(islands >= 1, "outer step: no islands");
  TROUPE_CHECK(params.numel() == last_sync_.numel() && summed.numel() == last_sync_.numel() &&
                   params.dtype() == last_sync_.dtype() && summed.dtype() == last_sync_.dtype(),
               "outer step: a sum of other parameters");
  const std::int64_t n = params.numel();
  if (params.dtype() == DType::f64)
    nesterov(params.data_as<double>(), last_sync_.data_as<double>(), momentum_.data_as<double>(),
             summed.data_as<double>(), n, islands, options_.lr, options_.momentum);
  else
    nesterov(params.data_as<float>(), last_sync_.data_as<float>(), momentum_.data_as<float>(), summed.data_as<float>(),
             n, islands, options_.lr, options_.momentum);
  ++syncs_;
}

void OuterStep::sync(Tensor& params, const IslandGroup& group) {
  TROUPE_CHECK(group.count == 1 || group.sum, "outer step: islands without their sum");
  pseudo_gradient(params, delta_);
  if (group.count > 1) group.sum(delta_);
  apply(params, delta_, group.count);
}

void train_islands(std::span<SimulatedIsland> islands, std::span<OuterStep> outer, long steps_taken, long steps) {
  TROUPE_CHECK(!islands.empty() && islands.size() == outer.size(), "simulated islands: one outer state per island");
  const int k = static_cast<int>(islands.size());
  const Tensor& first = islands.front().params;
  MemoryScope scope(MemoryKind::optimizer_state);
  Tensor sum = Tensor::zeros(first.shape(), first.dtype()), delta = Tensor::zeros(first.shape(), first.dtype());
  for (long s = steps_taken; s < steps; ++s) {
    for (SimulatedIsland& island : islands) island.step();
    if (!outer.front().due(s + 1, steps)) continue;
    // Σ_i in island order: ((Δ_0 + Δ_1) + Δ_2) + ...
    for (int i = 0; i < k; ++i) {
      outer[static_cast<std::size_t>(i)].pseudo_gradient(islands[static_cast<std::size_t>(i)].params,
                                                         i == 0 ? sum : delta);
      if (i == 0) continue;
      if (sum.dtype() == DType::f64)
        for (std::int64_t e = 0; e < sum.numel(); ++e) sum.data_as<double>()[e] += delta.data_as<double>()[e];
      else
        for (std::int64_t e = 0; e < sum.numel(); ++e) sum.data_as<float>()[e] += delta.data_as<float>()[e];
    }
    for (int i = 0; i < k; ++i)
      outer[static_cast<std::size_t>(i)].apply(islands[static_cast<std::size_t>(i)].params, sum, k);
  }
}

}  // namespace troupe::compute
