#include "comm/reduce_sum.hpp"

namespace troupe::comm {
namespace {

template <typename T>
void add_into(T* __restrict dst, const T* __restrict src, std::size_t count) {
#pragma omp simd
  for (std::size_t i = 0; i < count; ++i) dst[i] += src[i];
}

}  // namespace

bool reducible(compute::DType dtype) { return dtype == compute::DType::f32 || dtype == compute::DType::f64; }

void reduce_sum(compute::DType dtype, void* dst, const void* src, std::size_t count) {
  TROUPE_CHECK(reducible(dtype), "reduce_sum of a type collectives do not reduce");
  if (dtype == compute::DType::f32) {
    add_into(static_cast<float*>(dst), static_cast<const float*>(src), count);
  } else {
    add_into(static_cast<double*>(dst), static_cast<const double*>(src), count);
  }
}

}  // namespace troupe::comm
