#include "compute/train/balance.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace troupe::compute {

std::string_view balance_mode_name(BalanceMode mode) {
  switch (mode) {
    case BalanceMode::none: return "none";
    case BalanceMode::fixed: return "static";
    case BalanceMode::dynamic: return "dynamic";
  }
  return "?";
}

Expected<std::vector<int>> proportional_shares(int units, std::span<const double> weights) {
  const int replicas = static_cast<int>(weights.size());
  if (replicas == 0) return Error{"no replica to share a batch between"};
  if (units < replicas)
    return Error{std::to_string(units) + " units cannot give each of " + std::to_string(replicas) + " replicas one"};
  double total = 0;
  for (double w : weights) {
    if (!std::isfinite(w) || w <= 0) return Error{"a replica's weight must be a positive number"};
    total += w;
  }
  // Step 1: one unit each. Step 2: the rest by the floor of each quota. Step 3: what is left, one
  // each to the largest remainders (ties to the lower replica).
  const int rest = units - replicas;
  std::vector<int> shares(weights.size(), 1);
  std::vector<double> remainders(weights.size());
  int given = 0;
  for (std::size_t r = 0; r < weights.size(); ++r) {
    const double quota = rest * (weights[r] / total);
    const int whole = std::min(rest, static_cast<int>(std::floor(quota)));
    shares[r] += whole;
    remainders[r] = quota - whole;
    given += whole;
  }
  std::vector<std::size_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return remainders[a] > remainders[b]; });
  for (std::size_t i = 0; given < rest; ++i, ++given) ++shares[order[i % order.size()]];
  return shares;
}

int first_unit(std::span<const int> shares, int replica) {
  return std::accumulate(shares.begin(), shares.begin() + replica, 0);
}

std::uint64_t unit_first_sample(long step, int units, int replicas, int unit, int island, int islands, int batch) {
  TROUPE_CHECK(step >= 0 && replicas >= 1 && units % replicas == 0 && 0 <= unit && unit < units && 0 <= island &&
                   island < islands && batch >= 1,
               "a unit outside its step, or a step not of whole micro-batches a replica");
  const auto R = static_cast<std::uint64_t>(replicas), u = static_cast<std::uint64_t>(unit);
  const std::uint64_t micro_index = static_cast<std::uint64_t>(step) * (static_cast<std::uint64_t>(units) / R) + u / R;
  const std::uint64_t slot =
      (micro_index * static_cast<std::uint64_t>(islands) + static_cast<std::uint64_t>(island)) * R + u % R;
  return slot * static_cast<std::uint64_t>(batch);
}

std::string shares_text(std::span<const int> shares) {
  std::string text;
  for (std::size_t i = 0; i < shares.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(shares[i]);
  return text;
}

}  // namespace troupe::compute
