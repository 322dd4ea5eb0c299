#pragma once
// Which precision the products of a job run in (train.precision), one policy for every backend,
// decided once in the config and carried to make_backend as this enum:
//   fp32: every op in f32.
//   bf16: mixed precision. Each linear layer's products (qkv, the attention's projection, c_fc,
//         c_proj and the lm head, forward and both backward products) take their operands
//         rounded to bf16 (nearest even) and accumulate and write in f32. The master weights,
//         gradient sums, AdamW moments, checkpoints, LayerNorm, softmax, the loss and every
//         reduction stay f32 (docs/precision.md says what is bf16 where, and the error bound).
// f64, which the finite-difference checks run in, is exact under either: the policy rounds f32
// products only.

#include <cstdint>
#include <string_view>

namespace troupe::compute {

enum class Precision : std::uint8_t { fp32, bf16 };

// Every precision, in the order train.precision lists them: the config parser reads a name with these.
inline constexpr Precision precisions[] = {Precision::fp32, Precision::bf16};

constexpr std::string_view precision_name(Precision precision) {
  switch (precision) {
    case Precision::fp32: return "fp32";
    case Precision::bf16: return "bf16";
  }
  return "unknown precision";
}

}  // namespace troupe::compute
