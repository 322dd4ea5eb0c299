// tile_product against a float64 product, for every kernel this CPU runs (so the AVX2 kernel is
// checked on an AVX-512 machine too), at shapes that leave partial row tiles, partial vector
// bands and columns that fill no vector, with a read directly and transposed, beta 0 and not,
// and each kind of causal zeros.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "compute/cpu/tile_product.hpp"

namespace {

using troupe::compute::cpu::Causal;
using troupe::compute::cpu::TileKernel;

std::string name_of(TileKernel kernel) {
  switch (kernel) {
    case TileKernel::avx512:
      return "avx512";
    case TileKernel::avx2:
      return "avx2";
    case TileKernel::blas:
      return "blas";
  }
  return "?";
}

// Whether the causal zeros leave a[i, p] a real term, and c[i, j] a wanted output.
bool term_kept(const Causal& causal, int i, int p) {
  if (causal.zeros == Causal::Zeros::terms_after) return p <= i + causal.offset;
  if (causal.zeros == Causal::Zeros::terms_before) return p >= i + causal.offset;
  return true;
}
bool column_wanted(const Causal& causal, int i, int j) {
  return causal.zeros != Causal::Zeros::columns_after || j <= i + causal.offset;
}

}  // namespace

TEST_CASE("tile products match float64 products on every kernel the cpu runs, causal zeros skipped", "[kernels]") {
  struct Dims {
    int m, n, k;
  };
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const auto kernels = troupe::compute::cpu::tile_kernels_here();
  REQUIRE(kernels.back() == TileKernel::blas);
  const Causal causals[] = {{},
                            {Causal::Zeros::terms_after, 0},
                            {Causal::Zeros::terms_after, 9},
                            {Causal::Zeros::terms_before, -3},
                            {Causal::Zeros::terms_before, 20},
                            {Causal::Zeros::columns_after, 0},
                            {Causal::Zeros::columns_after, 40}};
  for (const TileKernel kernel : kernels) {
    for (const Dims d : {Dims{64, 256, 64}, Dims{13, 37, 29}, Dims{64, 64, 200}, Dims{7, 100, 1}}) {
      for (const bool a_transposed : {false, true}) {
        for (const float beta : {0.0f, 0.5f}) {
          for (const Causal& causal : causals) {
            const int lda = a_transposed ? d.m + 3 : d.k + 5, ldb = d.n + 2, ldc = d.n + 1;
            std::vector<float> a(static_cast<std::size_t>(a_transposed ? d.k : d.m) * lda);
            std::vector<float> b(static_cast<std::size_t>(d.k) * ldb), c(static_cast<std::size_t>(d.m) * ldc);
            for (auto* v : {&a, &b, &c})
              for (float& x : *v) x = uniform(rng);
            const std::ptrdiff_t a_row = a_transposed ? 1 : lda, a_col = a_transposed ? lda : 1;
            for (int i = 0; i < d.m; ++i)
              for (int p = 0; p < d.k; ++p)
                if (!term_kept(causal, i, p)) a[i * a_row + p * a_col] = 0.0f;
            const std::vector<float> c_before = c;
            const float alpha = 0.75f;
            troupe::compute::cpu::tile_product_with(kernel, d.m, d.n, d.k, alpha, a.data(), a_row, a_col, b.data(),
                                                    ldb, beta, c.data(), ldc, causal);
            double worst = 0;
            for (int i = 0; i < d.m; ++i) {
              for (int j = 0; j < d.n; ++j) {
                if (!column_wanted(causal, i, j)) continue;
                double sum = 0, magnitude = 0;
                for (int p = 0; p < d.k; ++p) {
                  const double term = double(a[i * a_row + p * a_col]) * b[static_cast<std::size_t>(p) * ldb + j];
                  sum += term;
                  magnitude += std::abs(term);
                }
                const double before = c_before[static_cast<std::size_t>(i) * ldc + j];
                const double expected = alpha * sum + beta * before;
                const double got = c[static_cast<std::size_t>(i) * ldc + j];
                worst = std::max(worst, std::abs(got - expected) / (alpha * magnitude + std::abs(beta * before) + 1e-30));
              }
            }
            INFO(name_of(kernel) << " m " << d.m << " n " << d.n << " k " << d.k << " a transposed " << a_transposed
                                 << " beta " << beta << " causal " << static_cast<int>(causal.zeros) << " offset "
                                 << causal.offset);
            CHECK(worst < 1e-6);
          }
        }
      }
    }
  }
}

TEST_CASE("transpose_into transposes floats and doubles at sizes that leave partial blocks", "[kernels]") {
  for (const int rows : {1, 8, 19, 64}) {
    for (const int cols : {3, 8, 64, 70}) {
      const int ld = cols + 4, ld_dst = rows + 5;
      std::vector<float> src(static_cast<std::size_t>(rows) * ld), dst(static_cast<std::size_t>(cols) * ld_dst);
      std::vector<double> src64(src.size()), dst64(dst.size());
      for (std::size_t i = 0; i < src.size(); ++i) src64[i] = src[i] = static_cast<float>(i);
      troupe::compute::cpu::transpose_into(dst.data(), ld_dst, src.data(), rows, cols, ld);
      troupe::compute::cpu::transpose_into(dst64.data(), ld_dst, src64.data(), rows, cols, ld);
      int wrong = 0;
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) {
          const float expected = src[static_cast<std::size_t>(r) * ld + c];
          wrong += dst[static_cast<std::size_t>(c) * ld_dst + r] != expected;
          wrong += dst64[static_cast<std::size_t>(c) * ld_dst + r] != expected;
        }
      INFO("rows " << rows << " cols " << cols);
      CHECK(wrong == 0);
    }
  }
}
