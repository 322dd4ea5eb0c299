#pragma once
// A host buffer kept from one use to the next: for code that copies into a buffer of its own on
// every call (the context exchange's blocks), which would otherwise allocate and zero-fill it
// each time. The buffer is handed out again only once nothing else holds it — a transfer given
// up before its finish may still hold it and a late block still land in it — and a new one is
// taken otherwise.

#include <cstddef>

#include "compute/tensor.hpp"

namespace troupe::compute {

class ReusedBuffer {
 public:
  // `bytes` (whole 4-byte words) of host memory as an f32 tensor: the kept buffer's first bytes
  // when it is large enough and held by nobody else, else a new zero-filled buffer that is kept
  // from now on. Its contents are whatever the last use left.
  Tensor take(std::size_t bytes);
  // Forgets the kept buffer (its holders keep it alive); the next take allocates.
  void drop() { kept_ = Tensor(); }

 private:
  Tensor kept_;
};

}  // namespace troupe::compute
