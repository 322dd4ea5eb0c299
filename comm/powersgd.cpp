#include "comm/powersgd.hpp"

#include <cmath>
#include <limits>
#include <vector>

namespace troupe::comm::powersgd {

bool worth_compressing(std::int64_t rows, std::int64_t cols, int r) {
  return rows > 1 && cols > 1 && (rows + cols) * r < rows * cols;
}

template <typename T>
void multiply(const T* m, const T* q, T* p, std::int64_t rows, std::int64_t cols, int r) {
  for (std::int64_t i = 0; i < rows; ++i) {
    T* out = p + i * r;
    for (int k = 0; k < r; ++k) out[k] = 0;
    const T* row = m + i * cols;
    for (std::int64_t j = 0; j < cols; ++j) {
      const T x = row[j];
      const T* qj = q + j * r;
      for (int k = 0; k < r; ++k) out[k] += x * qj[k];
    }
  }
}

template <typename T>
void multiply_transposed(const T* m, const T* p, T* q, std::int64_t rows, std::int64_t cols, int r) {
  for (std::int64_t j = 0; j < cols * r; ++j) q[j] = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    const T* row = m + i * cols;
    const T* pi = p + i * r;
    for (std::int64_t j = 0; j < cols; ++j) {
      const T x = row[j];
      T* qj = q + j * r;
      for (int k = 0; k < r; ++k) qj[k] += x * pi[k];
    }
  }
}

template <typename T>
void orthonormalise(T* p, std::int64_t rows, int r) {
  auto column_norm = [&](int k) {
    T squares = 0;
    for (std::int64_t i = 0; i < rows; ++i) squares += p[i * r + k] * p[i * r + k];
    return std::sqrt(squares);
  };
  std::vector<T> before(static_cast<std::size_t>(r));
  for (int k = 0; k < r; ++k) before[k] = column_norm(k);
  // What is left of a column that the earlier ones span is rounding noise, and normalising
  // noise would give a direction that is not orthogonal to them: such a column becomes zero
  // (as does a column of zeros, never NaN). P has the same bits on every rank, so every rank
  // decides alike.
  const T negligible = std::sqrt(std::numeric_limits<T>::epsilon());
  for (int k = 0; k < r; ++k) {
    const T norm = column_norm(k);
    const T scale = norm > negligible * before[k] ? T{1} / norm : T{0};
    for (std::int64_t i = 0; i < rows; ++i) p[i * r + k] *= scale;
    for (int later = k + 1; later < r; ++later) {
      T dot = 0;
      for (std::int64_t i = 0; i < rows; ++i) dot += p[i * r + k] * p[i * r + later];
      for (std::int64_t i = 0; i < rows; ++i) p[i * r + later] -= dot * p[i * r + k];
    }
  }
}

template <typename T>
void reconstruct(const T* p, const T* q, T* out, std::int64_t rows, std::int64_t cols, int r) {
  for (std::int64_t i = 0; i < rows; ++i) {
    const T* pi = p + i * r;
    T* row = out + i * cols;
    for (std::int64_t j = 0; j < cols; ++j) {
      const T* qj = q + j * r;
      T sum = 0;
      for (int k = 0; k < r; ++k) sum += pi[k] * qj[k];
      row[j] = sum;
    }
  }
}

#define TROUPE_POWERSGD_TYPE(T)                                                                  \
  template void multiply<T>(const T*, const T*, T*, std::int64_t, std::int64_t, int);            \
  template void multiply_transposed<T>(const T*, const T*, T*, std::int64_t, std::int64_t, int); \
  template void orthonormalise<T>(T*, std::int64_t, int);                                        \
  template void reconstruct<T>(const T*, const T*, T*, std::int64_t, std::int64_t, int);
TROUPE_POWERSGD_TYPE(float)
TROUPE_POWERSGD_TYPE(double)
#undef TROUPE_POWERSGD_TYPE

}  // namespace troupe::comm::powersgd
