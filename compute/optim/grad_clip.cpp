#include "compute/optim/grad_clip.hpp"

#include <cmath>

namespace troupe::compute {

double clip_grad_norm(Backend& backend, Tensor& grads, double max_norm) {
  double norm = std::sqrt(backend.sum_of_squares(grads));
  scale_to_norm(backend, grads, norm, max_norm);
  return norm;
}

void scale_to_norm(Backend& backend, Tensor& grads, double norm, double max_norm) {
  if (max_norm > 0 && norm > max_norm) backend.scale(grads, static_cast<float>(max_norm / (norm + 1e-6)));
}

}  // namespace troupe::compute
