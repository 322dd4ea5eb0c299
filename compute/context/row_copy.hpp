#pragma once
// Column ranges of row-major matrices, copied row by row: the packing of q, k and v slices into
// the blocks context attention sends, and back.

#include <algorithm>
#include <cstddef>

namespace troupe::compute::context {

// For each of `rows` rows: dst[i, dst_col .. dst_col + width) = src[i, src_col .. src_col + width),
// rows ld_dst and ld_src elements apart.
template <typename Real>
void copy_columns(Real* dst, int ld_dst, int dst_col, const Real* src, int ld_src, int src_col, int width,
                  std::size_t rows) {
  for (std::size_t i = 0; i < rows; ++i) {
    const Real* from = src + i * ld_src + src_col;
    std::copy(from, from + width, dst + i * ld_dst + dst_col);
  }
}

}  // namespace troupe::compute::context
