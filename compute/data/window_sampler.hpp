#pragma once
// Training windows of T + 1 tokens (inputs are the first T, targets the same shifted by one) and
// the order they are read in. The order is a pure function of (seed, epoch, global sample
// index): nothing is stored, so a run killed and resumed at global index g reads exactly what an
// undisturbed run reads, and data-parallel ranks need no coordination — rank r of n, with
// micro-batch b, reads global indices step * n * b + r * b + [0, b).
//
// An epoch is S windows on a grid of stride T (consecutive windows share one token, as llm.c's
// loader reads B * T + 1 tokens and advances by B * T), so each token the grid covers is a
// target once per epoch. Per epoch:
//   1. key   = hash_combine(seed, epoch)   (compute/random.hpp)
//   2. shift = a pseudo-random offset of the whole grid in [0, shift_range), so epochs see
//              different window boundaries (and the tokens the grid leaves out change)
//   3. order = permute_index(i, S, key): window i of the epoch starts at shift + T * order
//
//   global index g:  epoch = g / S,  i = g % S,  start = shift(epoch) + T * order(epoch, i)
//
// S is fixed across epochs so that g maps to an epoch by a division: S = N / T - 1 windows leave
// room for any shift in [0, T) (N tokens); streams shorter than 2T get one window and the shifts
// that fit (N - T of them).

#include <cstddef>
#include <cstdint>

namespace troupe::compute {

class WindowSampler {
 public:
  // Needs T >= 1 and num_tokens >= T + 1 (split_train_val guarantees it).
  WindowSampler(std::size_t num_tokens, int T, std::uint64_t seed);

  std::size_t windows_per_epoch() const { return windows_per_epoch_; }
  // Offset of the first of the T + 1 tokens of global sample `global_index`.
  std::size_t window_start(std::uint64_t global_index) const;
  // The grid offset of an epoch, in [0, min(T, N - S * T)) ⊆ [0, T).
  std::size_t epoch_shift(std::uint64_t epoch) const;

  std::size_t num_tokens() const { return num_tokens_; }
  int seq_len() const { return T_; }
  std::uint64_t seed() const { return seed_; }

 private:
  std::uint64_t epoch_key(std::uint64_t epoch) const;

  std::size_t num_tokens_;
  int T_;
  std::uint64_t seed_;
  std::size_t windows_per_epoch_;
  std::size_t shift_range_;
};

}  // namespace troupe::compute
