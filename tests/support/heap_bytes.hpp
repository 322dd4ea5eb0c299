#pragma once
// The heap's bytes in use, as the allocator counts them (mallinfo2: small blocks and mmapped ones):
// what a memory test measures a model's allocations by.

#include <malloc.h>

namespace troupe::test {

inline double heap_bytes_in_use() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<double>(info.uordblks + info.hblkhd);
}

}  // namespace troupe::test
