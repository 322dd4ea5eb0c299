#pragma once
// Uneven data-parallel shares (train.balance): a step's global batch of M micro-batches split over
// R replicas in proportion to their speeds, so a fast replica does not wait for a slow one.
//   none:   every replica takes train.grad_accum micro-batches (the uniform split).
//   static: replica r takes shares[r] of them, by the speeds the host file declares.
//   dynamic: the shares start as static's and follow the replicas' measured speeds (dynamic_shares.hpp).
//
// The shares: every replica takes one micro-batch; the other M − R go by largest remainder
// (Hamilton's method) in proportion to the weights, ties to the lower replica, so every process
// computes the same shares from the same weights.
//
// The step's micro-batches keep the uniform split's global order: micro-batch j of the step
// (0 ≤ j < M) reads samples (step·M + j)·B + [0, B) whichever replica runs it; replica r runs
// j in [first(r), first(r) + shares[r]). The gradient sum weights each replica's mean gradient by
// its share of the samples, shares[r]/M, which is scaling each micro-batch's loss by 1/M — the
// scale the uniform split gives it (1/(k·R) with M = k·R). So the sum is the global batch's mean
// gradient, as in the uniform split; only the order of the additions differs (docs/balance.md).

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "compute/expected.hpp"

namespace troupe::compute {

enum class BalanceMode { none, fixed, dynamic };  // fixed is spelt "static"

// Every mode, in the order train.balance lists them: the config parser reads a name with these.
inline constexpr BalanceMode balance_modes[] = {BalanceMode::none, BalanceMode::fixed, BalanceMode::dynamic};
std::string_view balance_mode_name(BalanceMode mode);  // "none", "static", "dynamic"

// `units` micro-batches (or samples) over replicas in proportion to `weights` (positive, finite):
// integer shares summing to `units`, each at least 1. An error when there are fewer units than
// replicas, no replica, or a weight that is not a positive number.
Expected<std::vector<int>> proportional_shares(int units, std::span<const double> weights);

// The first of the step's units replica `replica` takes: the shares of the replicas before it.
int first_unit(std::span<const int> shares, int replica);

// The first sample of unit `unit` of a step's `units` (R = `replicas` replicas' micro-batches:
// units / R each in the even split), island `island` of K = `islands`, `batch` samples a unit.
// The islands' units interleave as the even split's micro-batches do: unit u of island i in step s
// reads slot ((s·units/R + ⌊u/R⌋)·K + i)·R + u mod R. The even split numbers replica r's micro-batch
// j as unit j·R + r, uneven shares as first_unit(r) + j; with one island the slot is s·units + u,
// so each island reads the same samples whichever replicas run them.
std::uint64_t unit_first_sample(long step, int units, int replicas, int unit, int island, int islands, int batch);

// How far an uneven run's parameter norm may be from the even split's, relative, when only the
// order of the gradients' additions differs (plain sums; docs/balance.md's table).
inline constexpr double reordered_sums_param_norm_tolerance = 1e-6;
// The same where the sums are compressed (bf16, PowerSGD): each replica's partial sum is rounded or
// approximated, and an uneven split's partial sums are other sums.
inline constexpr double compressed_sums_param_norm_tolerance = 1e-4;

// "3, 1": the shares as a log line lists them.
std::string shares_text(std::span<const int> shares);

}  // namespace troupe::compute
