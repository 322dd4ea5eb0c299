#pragma once
// The CPU backend's products under train.precision bf16 (compute/precision.hpp): both operands
// rounded to bf16 (nearest even), the sums kept in f32, the result written in f32 (bf16 operands,
// f32 accumulation, f32 output).
//
// On BF16 units (AVX512-BF16, AMX; bf16_units_of_this_cpu() says where they are used), the
// operands are rounded into bf16 buffers and oneDNN matmuls multiply them, the backend's threads
// each taking a block of rows: one engine per backend, and one primitive per shape, made at its
// first call and kept (a full cache is emptied). Elsewhere the operands are rounded to bf16 values
// kept in f32 and OpenBLAS' sgemm multiplies them: the same numbers up to the order of the f32
// sums, and no faster than fp32 (the backend's name says so). docs/precision.md states the error
// bound both meet and tests/compute/cpu/test_bf16_products.cpp checks it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compute/cpu/cpu_kernels.hpp"
#include "compute/memory_ledger.hpp"

namespace troupe::compute::cpu {

class ThreadTeam;

// How a CPU multiplies bf16: in its own units through oneDNN, or emulated (rounded to bf16 values,
// multiplied in f32).
enum class Bf16Units { hardware, emulated };

// Whether oneDNN can multiply bf16 on this CPU's own units (AVX512-BF16 or AMX), however fast:
// the tests check that path wherever it runs.
bool bf16_units_present();
// The units the bf16 products use here: the CPU's own where they beat its fp32 FMAs — AMX, or
// AVX512-BF16 on a CPU that is not Intel's (Zen 4: 1.7× fp32's tokens/s on `small`) — else
// emulated. On an Intel core without AMX, oneDNN's AVX512-BF16 products ran at about half
// OpenBLAS' sgemm rate (a `small` step 0.55× as fast as fp32, emulated 0.91×: docs/precision.md).
Bf16Units bf16_units_of_this_cpu();
// The instruction set oneDNN runs bf16 products with here ("avx512_core_bf16", "avx512_core_amx",
// or the best it has without BF16 units).
std::string bf16_isa_name();
// Why bf16_units_of_this_cpu() is `emulated` here, for the first log line and bench compute ("no
// BF16 units on this CPU (best ISA avx2): …", "avx512_core_bf16 without AMX on an Intel CPU …");
// empty where it is `hardware`.
std::string bf16_emulation_reason();

class Bf16Products {
 public:
  // team rounds the operands and, with BF16 units, splits each product's rows among its threads.
  Bf16Products(ThreadTeam& team, Bf16Units units);
  ~Bf16Products();
  Bf16Products(const Bf16Products&) = delete;
  Bf16Products& operator=(const Bf16Products&) = delete;

  Bf16Units units() const { return units_; }
  // Bytes of an element of the operand copies: 2 (bf16) with BF16 units, 4 (bf16 values in f32) emulated.
  std::size_t operand_bytes() const { return units_ == Bf16Units::hardware ? 2 : 4; }
  // Grows the copies to `first` and `second` elements now (a product that needs more grows them
  // then). The memory ledger counts them as the kind the growing thread's MemoryScope names.
  void reserve(std::int64_t first, std::int64_t second);
  // The oneDNN matmuls cached by shape now (with BF16 units; at most 256: the cache is emptied
  // when it is full).
  std::size_t matmuls_kept() const;
  // Elements the copies hold now.
  std::int64_t reserved_first() const;
  std::int64_t reserved_second() const;

  // An operand as it is stored (cpu_kernels.hpp): f32 values, which the product rounds into its
  // copy, or bf16 bits already rounded (an activation the model stores in bf16), which it
  // multiplies as they are.
  using Operand = StoredInput;

  // c (m, n) = op(a) (m, k) · op(b) (k, n), added onto what c holds with `accumulate`. Row-major
  // with leading dimensions; op(x) is x or, with transpose_x, xᵀ of the stored (k, m) or (n, k).
  void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, Operand a, int lda, Operand b, int ldb,
            bool accumulate, float* c, int ldc);

  // The same in two halves, for products a caller splits among its threads itself (the grouped
  // products of a rank's experts): round() rounds both operands (a_count and b_count stored
  // elements) once, on the team; then each thread multiplies its parts with multiply_here(), on
  // the calling thread alone, op(a) from element a_at of the rounded a and op(b) from b_at of b.
  // Emulated, multiply_here() is an sgemm on OpenBLAS' current thread count. The rounded operands
  // stay valid until the next round() or gemm(); prepare_matmuls(parts) goes before a round of up
  // to `parts` concurrent multiply_here() calls of new shapes.
  struct Rounded {
    const std::uint16_t* a_bits = nullptr;  // with BF16 units
    const std::uint16_t* b_bits = nullptr;
    const float* a_values = nullptr;  // emulated
    const float* b_values = nullptr;
  };
  Rounded round(Operand a, std::int64_t a_count, Operand b, std::int64_t b_count);
  void prepare_matmuls(int parts);
  void multiply_here(const Rounded& r, bool transpose_a, bool transpose_b, int m, int n, int k, std::int64_t a_at,
                     int lda, std::int64_t b_at, int ldb, bool accumulate, float* c, int ldc);

 private:
  struct OneDnn;

  // Grows the copy of the first (`first`) or second operand to `elements`, counting what it adds.
  void grow(bool first, std::int64_t elements);

  ThreadTeam& team_;
  Bf16Units units_;
  std::unique_ptr<OneDnn> onednn_;          // hardware only
  std::vector<float> a_values_, b_values_;  // emulated only: the operands rounded, in f32
  // What the memory ledger counts of the copies: each growth's bytes under its caller's kind.
  std::vector<std::pair<MemoryKind, std::uint64_t>> counted_;
};

}  // namespace troupe::compute::cpu
