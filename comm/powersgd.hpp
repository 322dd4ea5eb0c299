#pragma once
// PowerSGD's arithmetic on one gradient matrix M (rows × cols, row-major), as plain loops in the
// gradient's own type (f32 in training, f64 in the tests). r is small (1 to 8), so every product
// here costs about rows·cols·r multiply-adds: well under 1% of the backward pass that made M.
// One step (Vogels et al. 2019; PyTorch's powerSGD_hook):
//   M = gradient + residual;  P = M·Q;  P summed over the group, orthonormalised;
//   Q = Mᵀ·P;  Q summed over the group;  the summed gradient is approximated by P·Qᵀ;
//   residual = M − P·Qᵀ / n (this rank's share of what was not sent); Q is kept for the next step.
// Every rank holds the same summed P and Q, so every rank computes the same bits of P·Qᵀ.

#include <cstdint>

namespace troupe::comm::powersgd {

// Whether sending P and Q (rows·r + cols·r values) is cheaper than M; vectors never are.
bool worth_compressing(std::int64_t rows, std::int64_t cols, int r);

// p (rows × r) = m (rows × cols) · q (cols × r).
template <typename T>
void multiply(const T* m, const T* q, T* p, std::int64_t rows, std::int64_t cols, int r);
// q (cols × r) = mᵀ · p, m rows × cols, p rows × r.
template <typename T>
void multiply_transposed(const T* m, const T* p, T* q, std::int64_t rows, std::int64_t cols, int r);
// The columns of p (rows × r) made orthonormal in place (modified Gram-Schmidt, in column order);
// a column with (next to) nothing left once the earlier ones are taken out becomes zero, so a
// gradient of rank below r gives fewer columns, not noise.
template <typename T>
void orthonormalise(T* p, std::int64_t rows, int r);
// out (rows × cols) = p · qᵀ.
template <typename T>
void reconstruct(const T* p, const T* q, T* out, std::int64_t rows, std::int64_t cols, int r);

}  // namespace troupe::comm::powersgd
