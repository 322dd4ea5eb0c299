#pragma once
// What CpuBackend's ops share (cpu_backend.cpp and cpu_backend_grouped.cpp, included there alone):
// how its thread team splits work, the checks of the relations its kernels rely on (a mismatch is
// an internal bug and throws), and the dispatch to a kernel by the tensors' dtype, f32 or f64, or
// an activation stored in bf16.

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "compute/backend_checks.hpp"
#include "compute/cpu/cpu_kernels.hpp"
#include "compute/tensor.hpp"

namespace troupe::compute::cpu_backend_ops {

using checks::op_prefix;

// How the team splits its work. Elementwise ranges split at multiples of 256 bytes, a multiple of
// every vector width, so an element meets the same lanes as in one sweep (thread_team.hpp); rows
// split anywhere, since every row is computed alone, but a part of under 16 rows is not worth a
// thread.
template <typename Real>
constexpr std::int64_t element_grain = 256 / sizeof(Real);
constexpr std::int64_t row_grain = 16;
// fill_zero splits at multiples of a page; sum_of_squares sums blocks of this many elements, a
// multiple of every element grain, each on one thread.
constexpr std::int64_t fill_grain = 4096;
constexpr std::int64_t sum_block = std::int64_t{1} << 16;
// A product's starting rows, and zeros over a whole tensor, go out through streaming stores from this
// size on, about what a core's L2 holds: what is smaller is still in cache when it is next read
// (matmul.cpp, elementwise.cpp).
constexpr std::int64_t streaming_bytes = std::int64_t{2} << 20;

// Every tensor defined, on the cpu, and of the first one's dtype, which is f32 or f64.
inline DType check_real(const char* op, std::initializer_list<const Tensor*> tensors) {
  const DType dtype = checks::same_device_and_dtype(Device::cpu, op, tensors);
  TROUPE_CHECK(dtype == DType::f32 || dtype == DType::f64,
               op_prefix(op) + "the cpu backend computes in f32 or f64, got " + (*tensors.begin())->describe());
  return dtype;
}

// Writes an f32 op's results into bf16 `out` over units [begin, end) of `width` elements each
// (rows, or single elements), a piece at a time: f32_op(tile, first, count) writes units [first,
// first + count) into the thread's tile, which is then rounded into out.
template <typename F32Op>
void rounded_into(std::uint16_t* out, std::int64_t begin, std::int64_t end, std::int64_t width, std::int64_t piece,
                  F32Op&& f32_op) {
  thread_local std::vector<float> tile;
  for (std::int64_t first = begin; first < end; first += piece) {
    const std::int64_t count = std::min(piece, end - first);
    tile.resize(static_cast<std::size_t>(count * width));
    f32_op(tile.data(), first, count);
    cpu::round_to_bf16_bits(out + first * width, tile.data(), count * width);
  }
}

// A tensor the kernels read as it is stored (an operand of the bf16 products, the attention's
// qkv), from element `offset` on: f32 values, or bf16 bits.
inline cpu::StoredInput operand_of(const Tensor& t, std::int64_t offset = 0) {
  if (t.dtype() == DType::bf16) return {nullptr, t.data_as<std::uint16_t>() + offset};
  return {t.data_as<float>() + offset, nullptr};
}

// An activation a stage may store in bf16 (Backend::activation_storage_dtype): on the cpu, in f32
// or bf16.
inline void check_stored(const Tensor& t, const char* op) {
  checks::on_device(t, Device::cpu, op);
  TROUPE_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::bf16,
               op_prefix(op) + "an activation stored in f32 or bf16, got " + t.describe());
}

inline cpu::StoredOutput stored_output(Tensor& t) {
  if (t.dtype() == DType::bf16) return {nullptr, t.data_as<std::uint16_t>()};
  return {t.data_as<float>(), nullptr};
}

// Every tensor f32, for an op with a tensor stored in bf16.
inline void check_f32(const char* op, std::initializer_list<const Tensor*> tensors) {
  TROUPE_CHECK(
      check_real(op, tensors) == DType::f32,
      op_prefix(op) + "an activation stored in bf16 goes with f32 tensors, got " + (*tensors.begin())->describe());
}

// The dtype an op computes in whose input `inp` may be stored in bf16 (then f32, as every one of
// `others` must be) or in it.
inline DType compute_dtype(const char* op, const Tensor& inp, std::initializer_list<const Tensor*> others) {
  if (inp.dtype() != DType::bf16) {
    const DType dtype = check_real(op, others);
    checks::on_device(inp, Device::cpu, op);
    check_dtype(inp, dtype, op);
    return dtype;
  }
  check_stored(inp, op);
  check_f32(op, others);
  return DType::f32;
}

// Every id in [0, limit).
inline void check_ids(const Tensor& ids, std::int64_t limit, const char* op) {
  checks::on_device(ids, Device::cpu, op);
  check_dtype(ids, DType::i32, op);
  const std::int32_t* p = ids.data_as<std::int32_t>();
  const auto bad = std::find_if(p, p + ids.numel(), [limit](std::int32_t id) { return id < 0 || id >= limit; });
  TROUPE_CHECK(bad == p + ids.numel(), op_prefix(op) + "id " + std::to_string(*bad) + " at index " +
                                           std::to_string(bad - p) + " is outside [0, " + std::to_string(limit) + ")");
}

inline checks::EncoderDims check_encoder_shapes(const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                                                const Tensor& act, const char* op) {
  const checks::EncoderDims dims = checks::encoder(tokens, wte, wpe, act, op);
  check_ids(tokens, wte.dim(0), op);
  return dims;
}

// A shard's tokens may lie outside its rows (they look up zeros), so only their sign is checked.
inline checks::EncoderDims check_encoder_shapes_of_shard(const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                                                         const Tensor& act, const char* op) {
  const checks::EncoderDims dims = checks::encoder(tokens, wte, wpe, act, op);
  check_ids(tokens, std::numeric_limits<std::int32_t>::max(), op);
  return dims;
}

inline checks::AttentionDims check_attention_shapes(const Tensor& qkv, const Tensor& out, const Tensor& att, int n_head,
                                                    const char* op) {
  const checks::AttentionDims dims = checks::attention(qkv, out, n_head, op);
  checks::shape(att, {dims.B, n_head, dims.T}, op);
  return dims;
}

// Calls fn(Real{}) with Real = float or double after dtype.
template <typename Fn>
void with_real(DType dtype, Fn&& fn) {
  if (dtype == DType::f32) {
    fn(float{});
  } else {
    fn(double{});
  }
}

}  // namespace troupe::compute::cpu_backend_ops
