#pragma once
// Filling a batch of B windows into the model's int32 input and target arrays (B x T each,
// row-major; targets are the inputs shifted by one token).
//
// Which to use:
//  - training: fill_batch with WindowSampler(train.size(), T, seed) over the training part; a
//    batch is defined by its global sample indices alone (see window_sampler.hpp).
//  - validation: fill_sequential_batch over the validation part. Every evaluation reads the same
//    windows (0, T, 2T, ... from the start of the part), so validation losses are comparable
//    across steps, seeds and parallel layouts; evaluation batch k on rank r of n with micro-batch
//    b reads windows k * n * b + r * b + [0, b).

#include <cstddef>
#include <cstdint>
#include <span>

#include "compute/data/window_sampler.hpp"

namespace troupe::compute {

// Windows of global indices first_global_index + [0, batch) of `sampler`, which must have been
// built for tokens.size() tokens.
void fill_batch(std::int32_t* inputs, std::int32_t* targets, std::span<const std::uint16_t> tokens,
                const WindowSampler& sampler, std::uint64_t first_global_index, int batch);

// Number of windows on the unshifted grid of stride T: floor((N - 1) / T).
std::size_t sequential_windows(std::size_t num_tokens, int T);

// Windows first_window + [0, batch) of that grid, wrapping around past the last one, so a
// validation part shorter than a batch still fills it. Needs N >= T + 1.
void fill_sequential_batch(std::int32_t* inputs, std::int32_t* targets, std::span<const std::uint16_t> tokens, int T,
                           std::uint64_t first_window, int batch);

}  // namespace troupe::compute
