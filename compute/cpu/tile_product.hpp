#pragma once
// The products inside one attention head: matrices of tens to a thousand rows and a head's 64
// columns, where sgemm spends most of its time packing and reaches about a third of its peak.
// tile_product multiplies them in place with a register-blocked kernel that packs nothing: a tile
// of c stays in vector registers while k runs, each step loading one row of b and broadcasting one
// element of a per row. a is read through two strides, so a transposed operand (Pᵀ, dSᵀ in the
// backward) costs nothing; b is row-major, so attention packs Kᵀ and Vᵀ once per head.
//
// The kernel is compiled for AVX-512 and for AVX2+FMA and picked by the CPU the program runs on
// (nothing is built with -march); elsewhere, and for double, the product goes to BLAS. Each
// element of c is one fused multiply-add chain over p = 0, 1, ..., k-1 whatever the tile it falls
// in, so results depend on neither the shapes' split nor the thread that computes them.

#include <cstddef>
#include <vector>

namespace troupe::compute::cpu {

// Where a causal product's zeros are, relative to a diagonal p = i + offset (or j = i + offset)
// for row i of c: terms and columns past it are skipped a tile at a time. Skipped terms are zero
// in a, so c is the same; skipped columns of c are not written (some inside a tile past the
// diagonal are, as the full product has them).
struct Causal {
  enum class Zeros {
    none,
    terms_after,    // a[i, p] = 0 for p > i + offset (P · V: a query row sees keys up to its own)
    terms_before,   // a[i, p] = 0 for p < i + offset (Pᵀ · dout: a key is seen from its own row on)
    columns_after,  // c[i, j] is not needed for j > i + offset (q kᵀ: scores past the diagonal)
  };
  Zeros zeros = Zeros::none;
  int offset = 0;
};

// c (m, n) = alpha * a (m, k) · b (k, n) + beta * c, with a[i, p] at a[i * a_row + p * a_col]
// (a_row or a_col is 1), b and c row-major with leading dimensions ldb and ldc. With beta 0, c is
// only written.
void tile_product(int m, int n, int k, float alpha, const float* a, std::ptrdiff_t a_row, std::ptrdiff_t a_col,
                  const float* b, int ldb, float beta, float* c, int ldc, Causal causal = {});
void tile_product(int m, int n, int k, double alpha, const double* a, std::ptrdiff_t a_row, std::ptrdiff_t a_col,
                  const double* b, int ldb, double beta, double* c, int ldc, Causal causal = {});

// The float kernels this CPU can run, fastest first; tile_product takes the first. Tests run each.
enum class TileKernel { avx512, avx2, blas };
std::vector<TileKernel> tile_kernels_here();
void tile_product_with(TileKernel kernel, int m, int n, int k, float alpha, const float* a, std::ptrdiff_t a_row,
                       std::ptrdiff_t a_col, const float* b, int ldb, float beta, float* c, int ldc,
                       Causal causal = {});

// dst (cols, rows) = srcᵀ for src (rows, cols), with leading dimensions ld_dst and ld_src.
template <typename Real>
void transpose_into(Real* dst, int ld_dst, const Real* src, int rows, int cols, int ld_src);
// A leading dimension of at least n floats whose rows do not alias in the L1 cache: a power-of-
// two stride such as 256 floats maps the rows of a band of b onto a quarter of the cache's sets
// and evicts them before the next row tile reads them again.
int unaliased_leading_dimension(int n);
// dst (rows, cols) = src with leading dimension ld_src, rows packed one after the other. A b
// whose rows lie a page or more apart (a head's slice of qkv: 3C floats) defeats the hardware
// prefetcher; packed, the product runs about a quarter faster.
template <typename Real>
void pack_rows(Real* dst, const Real* src, int rows, int cols, int ld_src);

}  // namespace troupe::compute::cpu
