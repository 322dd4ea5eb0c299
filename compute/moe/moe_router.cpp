#include "compute/moe/moe_router.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace troupe::compute {

std::vector<double> RoutingSums::flat() const {
  std::vector<double> values(slots);
  values.insert(values.end(), probs.begin(), probs.end());
  values.push_back(lse_squares);
  values.push_back(tokens);
  return values;
}

RoutingSums RoutingSums::from_flat(std::span<const double> values, int experts) {
  const auto E = static_cast<std::size_t>(experts);
  TROUPE_CHECK(values.size() == 2 * E + 2, "routing sums of " + std::to_string(values.size()) + " values for " +
                                               std::to_string(experts) + " experts");
  return {{values.begin(), values.begin() + static_cast<std::ptrdiff_t>(E)},
          {values.begin() + static_cast<std::ptrdiff_t>(E), values.begin() + static_cast<std::ptrdiff_t>(2 * E)},
          values[2 * E],
          values[2 * E + 1]};
}

void set_losses(RoutingPlan& plan, const RoutingSums& sums) {
  const int E = plan.experts;
  TROUPE_CHECK(static_cast<int>(sums.slots.size()) == E && sums.tokens > 0, "routing sums of another router");
  const double slots = sums.tokens * plan.top_k;
  plan.load.assign(static_cast<std::size_t>(E), 0.0);
  double aux = 0;
  for (int e = 0; e < E; ++e) {
    const auto u = static_cast<std::size_t>(e);
    plan.load[u] = sums.slots[u] / slots;
    aux += plan.load[u] * (sums.probs[u] / sums.tokens);
  }
  plan.aux_loss = E * aux;
  plan.z_loss = sums.lse_squares / sums.tokens;
}

RoutingSums route(RoutingPlan& plan, Tensor& probs, Tensor& lse, Tensor& gates, const Tensor& logits, int top_k) {
  TROUPE_CHECK(logits.device() == Device::cpu, "the router runs on host tensors");
  TROUPE_CHECK(logits.rank() == 2, "router logits " + logits.describe());
  const std::int64_t N = logits.dim(0);
  const int E = static_cast<int>(logits.dim(1)), k = top_k;
  TROUPE_CHECK(k >= 1 && k <= E, "top-" + std::to_string(k) + " of " + std::to_string(E) + " experts");
  TROUPE_CHECK(probs.numel() >= N * E && lse.numel() >= N && gates.numel() >= N * k, "router buffers too small");
  plan.tokens = N;
  plan.experts = E;
  plan.top_k = k;
  plan.expert.assign(static_cast<std::size_t>(N * k), 0);
  plan.row.assign(static_cast<std::size_t>(N * k), 0);
  plan.offsets.assign(static_cast<std::size_t>(E) + 1, 0);
  std::vector<double> mean_prob(static_cast<std::size_t>(E), 0.0);
  double z_sum = 0;
  with_moe_real(logits.dtype(), [&]<typename Real>(Real) {
    const Real* x = logits.data_as<Real>();
    Real* p = probs.data_as<Real>();
    Real* g = gates.data_as<Real>();
    std::vector<int> order(static_cast<std::size_t>(E));
    for (std::int64_t t = 0; t < N; ++t) {
      const Real* xt = x + t * E;
      Real* pt = p + t * E;
      const double max = *std::max_element(xt, xt + E);
      double sum = 0;
      for (int i = 0; i < E; ++i) sum += std::exp(double(xt[i]) - max);
      const double log_sum = max + std::log(sum);
      lse.data_as<Real>()[t] = static_cast<Real>(log_sum);
      z_sum += log_sum * log_sum;
      for (int i = 0; i < E; ++i) {
        pt[i] = static_cast<Real>(std::exp(double(xt[i]) - log_sum));
        mean_prob[static_cast<std::size_t>(i)] += double(pt[i]);
      }
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int a, int b) { return pt[a] > pt[b] || (pt[a] == pt[b] && a < b); });
      double chosen = 0;
      for (int j = 0; j < k; ++j) chosen += double(pt[order[static_cast<std::size_t>(j)]]);
      for (int j = 0; j < k; ++j) {
        const int e = order[static_cast<std::size_t>(j)];
        plan.expert[static_cast<std::size_t>(t * k + j)] = e;
        g[t * k + j] = static_cast<Real>(double(pt[e]) / chosen);
        ++plan.offsets[static_cast<std::size_t>(e) + 1];
      }
    }
  });
  RoutingSums sums{std::vector<double>(static_cast<std::size_t>(E)), std::move(mean_prob), z_sum, double(N)};
  // Counting sort of the slots by expert, stable in slot order (token order within an expert).
  for (int e = 0; e < E; ++e) {
    const auto u = static_cast<std::size_t>(e);
    sums.slots[u] = double(plan.offsets[u + 1]);
    plan.offsets[u + 1] += plan.offsets[u];
  }
  std::vector<std::int64_t> next(plan.offsets.begin(), plan.offsets.end() - 1);
  for (std::int64_t s = 0; s < N * k; ++s) plan.row[static_cast<std::size_t>(s)] = next[plan.expert[s]]++;
  set_losses(plan, sums);
  return sums;
}

void route_backward(Tensor& dlogits, const Tensor& dgates, const Tensor& probs, const Tensor& lse,
                    const RoutingPlan& plan, double aux_scale, double z_scale) {
  const std::int64_t N = plan.tokens;
  const int E = plan.experts, k = plan.top_k;
  TROUPE_CHECK(dlogits.numel() >= N * E && dgates.numel() >= N * k, "router gradient buffers too small");
  // d(aux)/d(p_ti) = E · f_i / N, the same for every token.
  TROUPE_CHECK(static_cast<int>(plan.load.size()) == E, "a routing plan without its load");
  std::vector<double> aux_grad(static_cast<std::size_t>(E));
  for (int e = 0; e < E; ++e)
    aux_grad[static_cast<std::size_t>(e)] = aux_scale * E * plan.load[static_cast<std::size_t>(e)] / double(N);
  with_moe_real(dlogits.dtype(), [&]<typename Real>(Real) {
    std::vector<double> dp(static_cast<std::size_t>(E));
    for (std::int64_t t = 0; t < N; ++t) {
      const Real* pt = probs.data_as<Real>() + t * E;
      const Real* dg = dgates.data_as<Real>() + t * k;
      const int* chosen = plan.expert.data() + t * k;
      // g_j = p_j / S over the chosen: dp_m = dg_m / S - Σ_j dg_j p_j / S² for a chosen m.
      double S = 0, weighted = 0;
      for (int j = 0; j < k; ++j) S += double(pt[chosen[j]]);
      for (int j = 0; j < k; ++j) weighted += double(dg[j]) * double(pt[chosen[j]]);
      for (int i = 0; i < E; ++i) dp[static_cast<std::size_t>(i)] = aux_grad[static_cast<std::size_t>(i)];
      for (int j = 0; j < k; ++j) dp[static_cast<std::size_t>(chosen[j])] += double(dg[j]) / S - weighted / (S * S);
      // Softmax: dlogit_i = p_i (dp_i - Σ_m p_m dp_m); the z-loss adds z_scale · 2 lse p_i / N.
      double inner = 0;
      for (int i = 0; i < E; ++i) inner += double(pt[i]) * dp[static_cast<std::size_t>(i)];
      const double z_grad = z_scale * 2.0 * double(lse.data_as<Real>()[t]) / double(N);
      Real* dx = dlogits.data_as<Real>() + t * E;
      for (int i = 0; i < E; ++i)
        dx[i] = static_cast<Real>(double(pt[i]) * (dp[static_cast<std::size_t>(i)] - inner + z_grad));
    }
  });
}

}  // namespace troupe::compute
