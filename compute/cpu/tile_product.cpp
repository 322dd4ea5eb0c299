#include "compute/cpu/tile_product.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include <immintrin.h>

#include "compute/cpu/blas.hpp"

namespace troupe::compute::cpu {
namespace {

// GCC vector types; the kernel below is written once in them and compiled under each ISA's target.
typedef float Floats16 __attribute__((vector_size(64)));
typedef float Floats8 __attribute__((vector_size(32)));

// The operands, as tile_product takes them.
struct Operands {
  int k;
  float alpha;
  const float* a;
  std::ptrdiff_t a_row, a_col;
  const float* b;
  int ldb;
  float beta;
  float* c;
  int ldc;
};

// One tile of c: rows [i, i + Rows) by columns [j, j + Vectors * lanes), kept in registers over
// the terms p in [p_begin, p_end). Each element is the chain acc = a[i, p] * b[p, j] + acc in
// increasing p.
template <typename V, int Rows, int Vectors>
[[gnu::always_inline]] inline void register_tile(const Operands& x, int i, int j, int p_begin, int p_end) {
  constexpr int lanes = sizeof(V) / sizeof(float);
  // Every loop over r and v is unrolled in full, so that acc lives in registers, not on the stack.
  V acc[Rows][Vectors];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < Vectors; ++v) acc[r][v] = V{};
  const float* a = x.a + i * x.a_row + p_begin * x.a_col;
  const float* b = x.b + static_cast<std::ptrdiff_t>(p_begin) * x.ldb + j;
  for (int p = p_begin; p < p_end; ++p) {
    V bv[Vectors];
#pragma GCC unroll 4
    for (int v = 0; v < Vectors; ++v) std::memcpy(&bv[v], b + v * lanes, sizeof(V));
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      const float ar = a[r * x.a_row];
#pragma GCC unroll 4
      for (int v = 0; v < Vectors; ++v) acc[r][v] += ar * bv[v];
    }
    a += x.a_col;
    b += x.ldb;
  }
  const bool accumulate = x.beta != 0.0f;
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    float* c = x.c + static_cast<std::ptrdiff_t>(i + r) * x.ldc + j;
#pragma GCC unroll 4
    for (int v = 0; v < Vectors; ++v) {
      V out = x.alpha * acc[r][v];
      if (accumulate) {
        V old;
        std::memcpy(&old, c + v * lanes, sizeof(V));
        out += x.beta * old;
      }
      std::memcpy(c + v * lanes, &out, sizeof(V));
    }
  }
}

// register_tile for rows <= Rows and vectors <= Vectors known only at run time.
template <typename V, int Rows, int Vectors>
[[gnu::always_inline]] inline void tile(const Operands& x, int i, int rows, int j, int vectors, int p_begin,
                                        int p_end) {
  if constexpr (Rows > 1) {
    if (rows < Rows) return tile<V, Rows - 1, Vectors>(x, i, rows, j, vectors, p_begin, p_end);
  }
  if constexpr (Vectors > 1) {
    if (vectors < Vectors) return tile<V, Rows, Vectors - 1>(x, i, rows, j, vectors, p_begin, p_end);
  }
  register_tile<V, Rows, Vectors>(x, i, j, p_begin, p_end);
}

// The terms [begin, end) that rows [i, i + rows) need, and the columns they need up to.
struct Extent {
  int p_begin, p_end, columns_end;
};

inline Extent extent(const Causal& causal, int i, int rows, int k, int n) {
  const int diagonal_end = i + rows + causal.offset;
  switch (causal.zeros) {
    case Causal::Zeros::terms_after:
      return {0, std::clamp(diagonal_end, 0, k), n};
    case Causal::Zeros::terms_before:
      return {std::clamp(i + causal.offset, 0, k), k, n};
    case Causal::Zeros::columns_after:
      return {0, k, std::clamp(diagonal_end, 0, n)};
    case Causal::Zeros::none:
      break;
  }
  return {0, k, n};
}

// Columns [j, columns_end) of row i, one scalar chain per element in the same order as a lane's.
[[gnu::always_inline]] inline void scalar_row(const Operands& x, int i, int j, const Extent& e) {
  float* c = x.c + static_cast<std::ptrdiff_t>(i) * x.ldc;
  const float* a = x.a + i * x.a_row;
  for (int col = j; col < e.columns_end; ++col) {
    float acc = 0;
    for (int p = e.p_begin; p < e.p_end; ++p) acc += a[p * x.a_col] * x.b[static_cast<std::ptrdiff_t>(p) * x.ldb + col];
    c[col] = x.alpha * acc + (x.beta != 0.0f ? x.beta * c[col] : 0.0f);
  }
}

// The whole product in bands of Vectors vectors of columns (the last band narrower), each in tiles
// of Rows rows (the last shorter), narrowed or skipped where the causal zeros allow; then the
// columns left over, which fill no vector, one by one.
template <typename V, int Rows, int Vectors>
[[gnu::always_inline]] inline void product(const Operands& x, int m, int n, const Causal& causal) {
  constexpr int lanes = sizeof(V) / sizeof(float);
  const int vector_end = n / lanes * lanes;
  for (int j = 0; j < vector_end; j += Vectors * lanes) {
    const int band_vectors = std::min(Vectors, (vector_end - j) / lanes);
    for (int i = 0; i < m; i += Rows) {
      const int rows = std::min(Rows, m - i);
      const Extent e = extent(causal, i, rows, x.k, n);
      if (e.columns_end <= j) continue;
      const int vectors = std::min(band_vectors, (e.columns_end - j + lanes - 1) / lanes);
      tile<V, Rows, Vectors>(x, i, rows, j, vectors, e.p_begin, e.p_end);
    }
  }
  if (vector_end < n) {
    for (int i = 0; i < m; ++i) scalar_row(x, i, vector_end, extent(causal, i, 1, x.k, n));
  }
}

// 6 rows by 4 vectors: 24 of AVX-512's 32 registers accumulate, and each step's 4 loads of b and
// 6 broadcasts of a feed 24 multiply-adds. AVX2 has 16 registers: 6 rows by 2 vectors.
[[gnu::target("avx512f")]] void product_avx512(const Operands& x, int m, int n, const Causal& causal) {
  product<Floats16, 6, 4>(x, m, n, causal);
}
[[gnu::target("avx2,fma")]] void product_avx2(const Operands& x, int m, int n, const Causal& causal) {
  product<Floats8, 6, 2>(x, m, n, causal);
}

template <typename Real>
void blas_product(int m, int n, int k, Real alpha, const Real* a, std::ptrdiff_t a_row, std::ptrdiff_t a_col,
                  const Real* b, int ldb, Real beta, Real* c, int ldc) {
  const bool rows_contiguous = a_col == 1;
  gemm(rows_contiguous ? CblasNoTrans : CblasTrans, CblasNoTrans, m, n, k, alpha, a,
       static_cast<int>(rows_contiguous ? a_row : a_col), b, ldb, beta, c, ldc);
}

}  // namespace

std::vector<TileKernel> tile_kernels_here() {
  __builtin_cpu_init();
  std::vector<TileKernel> kernels;
  if (__builtin_cpu_supports("avx512f")) kernels.push_back(TileKernel::avx512);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) kernels.push_back(TileKernel::avx2);
  kernels.push_back(TileKernel::blas);
  return kernels;
}

void tile_product_with(TileKernel kernel, int m, int n, int k, float alpha, const float* a, std::ptrdiff_t a_row,
                       std::ptrdiff_t a_col, const float* b, int ldb, float beta, float* c, int ldc, Causal causal) {
  const Operands x{k, alpha, a, a_row, a_col, b, ldb, beta, c, ldc};
  switch (kernel) {
    case TileKernel::avx512:
      return product_avx512(x, m, n, causal);
    case TileKernel::avx2:
      return product_avx2(x, m, n, causal);
    case TileKernel::blas:
      return blas_product(m, n, k, alpha, a, a_row, a_col, b, ldb, beta, c, ldc);
  }
}

void tile_product(int m, int n, int k, float alpha, const float* a, std::ptrdiff_t a_row, std::ptrdiff_t a_col,
                  const float* b, int ldb, float beta, float* c, int ldc, Causal causal) {
  static const TileKernel best = tile_kernels_here().front();
  tile_product_with(best, m, n, k, alpha, a, a_row, a_col, b, ldb, beta, c, ldc, causal);
}

void tile_product(int m, int n, int k, double alpha, const double* a, std::ptrdiff_t a_row, std::ptrdiff_t a_col,
                  const double* b, int ldb, double beta, double* c, int ldc, Causal) {
  blas_product(m, n, k, alpha, a, a_row, a_col, b, ldb, beta, c, ldc);
}

namespace {

// dst (8, 8) = src (8, 8)ᵀ in eight registers: pairs of rows interleaved, then quadruples, then the
// 128-bit halves swapped.
[[gnu::target("avx2")]] void transpose_8x8(float* dst, std::ptrdiff_t ld_dst, const float* src,
                                           std::ptrdiff_t ld_src) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ld_src);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ld_dst, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ld_dst, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

template <typename Real>
void transpose_scalar(Real* dst, const Real* src, int r0, int r1, int c0, int c1, int ld_dst, int ld_src) {
  for (int c = c0; c < c1; ++c)
    for (int r = r0; r < r1; ++r)
      dst[static_cast<std::ptrdiff_t>(c) * ld_dst + r] = src[static_cast<std::ptrdiff_t>(r) * ld_src + c];
}

}  // namespace

// Floats go in 8-by-8 blocks through AVX2 registers where the CPU has them; the rest, and doubles,
// one by one.
template <typename Real>
void transpose_into(Real* dst, int ld_dst, const Real* src, int rows, int cols, int ld_src) {
  int r_end = 0, c_end = 0;
  if constexpr (std::is_same_v<Real, float>) {
    static const bool avx2 = tile_kernels_here().front() != TileKernel::blas;
    if (avx2) {
      r_end = rows / 8 * 8;
      c_end = cols / 8 * 8;
      for (int r = 0; r < r_end; r += 8)
        for (int c = 0; c < c_end; c += 8)
          transpose_8x8(dst + static_cast<std::ptrdiff_t>(c) * ld_dst + r, ld_dst,
                        src + static_cast<std::ptrdiff_t>(r) * ld_src + c, ld_src);
    }
  }
  transpose_scalar(dst, src, 0, r_end, c_end, cols, ld_dst, ld_src);
  transpose_scalar(dst, src, r_end, rows, 0, cols, ld_dst, ld_src);
}

int unaliased_leading_dimension(int n) { return (n + 15) / 16 * 16 + 16; }

template <typename Real>
void pack_rows(Real* dst, const Real* src, int rows, int cols, int ld_src) {
  for (int r = 0; r < rows; ++r)
    std::memcpy(dst + static_cast<std::ptrdiff_t>(r) * cols, src + static_cast<std::ptrdiff_t>(r) * ld_src,
                sizeof(Real) * static_cast<std::size_t>(cols));
}

template void pack_rows<float>(float*, const float*, int, int, int);
template void pack_rows<double>(double*, const double*, int, int, int);
template void transpose_into<float>(float*, int, const float*, int, int, int);
template void transpose_into<double>(double*, int, const double*, int, int, int);

}  // namespace troupe::compute::cpu
