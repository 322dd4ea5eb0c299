#include "compute/context/context_split.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace troupe::compute::context {

Expected<ContextSplit> make_context_split(int T, int shards) {
  if (shards < 1) return Error{"context.shards = " + std::to_string(shards) + " must be at least 1"};
  if (T % (2 * shards) != 0) {
    return Error{"a sequence of " + std::to_string(T) +
                 " positions does not split into 2 x context.shards = " + std::to_string(2 * shards) + " equal chunks"};
  }
  return ContextSplit{T, shards};
}

namespace {

// Calls copy(local row offset, global row offset) for each of the two chunks `rank` holds, per
// sequence, in elements.
template <typename Copy>
void for_each_chunk(int B, int width, const ContextSplit& split, int rank, Copy copy) {
  const std::size_t c = static_cast<std::size_t>(split.chunk());
  for (int b = 0; b < B; ++b) {
    for (int half = 0; half < 2; ++half) {
      const std::size_t local = (static_cast<std::size_t>(b) * split.local_rows() + half * c) * width;
      const std::size_t global = (static_cast<std::size_t>(b) * split.T + split.chunk_of(rank, half) * c) * width;
      copy(local, global, c * width);
    }
  }
}

}  // namespace

template <typename Real>
void take_rows(Real* local, const Real* global, int B, int width, const ContextSplit& split, int rank) {
  for_each_chunk(B, width, split, rank, [&](std::size_t l, std::size_t g, std::size_t n) {
    std::copy(global + g, global + g + n, local + l);
  });
}

template <typename Real>
void put_rows(Real* global, const Real* local, int B, int width, const ContextSplit& split, int rank) {
  for_each_chunk(B, width, split, rank,
                 [&](std::size_t l, std::size_t g, std::size_t n) { std::copy(local + l, local + l + n, global + g); });
}

template void take_rows<float>(float*, const float*, int, int, const ContextSplit&, int);
template void take_rows<double>(double*, const double*, int, int, const ContextSplit&, int);
template void take_rows<std::int32_t>(std::int32_t*, const std::int32_t*, int, int, const ContextSplit&, int);
template void put_rows<float>(float*, const float*, int, int, const ContextSplit&, int);
template void put_rows<double>(double*, const double*, int, int, const ContextSplit&, int);

}  // namespace troupe::compute::context
