#include "compute/cpu/sgemm_peak.hpp"

#include <algorithm>
#include <vector>

#include "compute/cpu/blas.hpp"

namespace troupe::compute::cpu {

double measure_sgemm_peak(std::initializer_list<int> sizes, CpuClock clock) {
  double best = 0;
  for (int n : sizes) {
    std::vector<float> a(static_cast<std::size_t>(n) * n), b(a.size()), c(a.size());
    // Any finite values away from the denormals time the same; a cheap pattern, since normal
    // draws for two n×n operands cost as much as the products and every node process measures.
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<float>(static_cast<int>(i % 101) - 50) * 0.01f;
      b[i] = static_cast<float>(static_cast<int>(i % 97) - 48) * 0.01f;
    }
    for (int rep = 0; rep < 4; ++rep) {
      const double start = clock_seconds(clock);
      gemm(CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
      const double secs = clock_seconds(clock) - start;
      if (rep > 0) best = std::max(best, 2.0 * n * n * static_cast<double>(n) / secs);
    }
  }
  return best;
}

}  // namespace troupe::compute::cpu
