#include "compute/train/micro_batch_sum.hpp"

#include "compute/memory_ledger.hpp"

namespace troupe::compute {

MicroBatchSum::MicroBatchSum(Backend& backend, Tensor gradients, int micro_batches)
    : backend_(&backend), gradients_(std::move(gradients)) {
  if (micro_batches < 2) return;
  MemoryScope scope(MemoryKind::gradients);
  earlier_ = backend.zeros({gradients_.numel()}, gradients_.dtype());
}

void MicroBatchSum::before_backward(int micro) {
  if (!earlier_.defined() || micro == 0) return;
  if (micro == 1)
    backend_->copy(earlier_, gradients_);
  else
    backend_->residual_forward(earlier_, earlier_, gradients_);
  backend_->fill_zero(gradients_);
}

void MicroBatchSum::add_earlier(std::int64_t begin, std::int64_t end) {
  if (!earlier_.defined() || begin == end) return;
  Tensor range = gradients_.slice(begin, {end - begin});
  backend_->residual_forward(range, range, earlier_.slice(begin, {end - begin}));
}

}  // namespace troupe::compute
