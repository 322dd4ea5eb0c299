#pragma once
// The reduction of every reducing collective: dst[i] = dst[i] + src[i], one element at a time
// in index order. Element-wise addition has no reassociation, so a vectorised loop gives the
// same bits as a scalar one: the reduction order of a collective is fixed by its algorithm
// alone (which rank's partial sum is added to which), never by this loop.

#include <cstddef>

#include "compute/tensor.hpp"

namespace troupe::comm {

// Whether reducing collectives take this element type: f32, f64, and bf16 (added in f32, each
// sum rounded to nearest even: the wire type of compressed gradients).
bool reducible(compute::DType dtype);
void reduce_sum(compute::DType dtype, void* dst, const void* src, std::size_t count);

}  // namespace troupe::comm
