#include "compute/reused_buffer.hpp"

#include <string>

namespace troupe::compute {

Tensor ReusedBuffer::take(std::size_t bytes) {
  TROUPE_CHECK(bytes % 4 == 0, "a reused buffer of " + std::to_string(bytes) + " bytes, not whole words");
  const auto words = static_cast<std::int64_t>(bytes / 4);
  if (!kept_.defined() || kept_.numel() < words || !kept_.sole_holder()) kept_ = Tensor::zeros({words}, DType::f32);
  return kept_.slice(0, {words});
}

}  // namespace troupe::compute
