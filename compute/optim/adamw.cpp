#include "compute/optim/adamw.hpp"

#include <algorithm>

#include "compute/memory_ledger.hpp"

namespace troupe::compute {

AdamW::AdamW(Backend& backend, std::span<const ParameterView> views, std::int64_t total, DType dtype,
             AdamWOptions options, std::int64_t begin, std::int64_t end, std::int64_t buffer_begin)
    : backend_(backend), options_(options), begin_(begin) {
  TROUPE_CHECK(0 <= begin && begin <= end && end <= total, "AdamW range");
  TROUPE_CHECK(0 <= buffer_begin && buffer_begin <= begin, "AdamW's buffer starts after its range");
  for (const auto& v : views) {
    std::int64_t lo = std::max(begin, v.offset), hi = std::min(end, v.offset + v.numel());
    if (lo < hi) segments_.push_back({lo - buffer_begin, lo - begin, hi - lo, v.decay});
  }
  MemoryScope scope(MemoryKind::optimizer_state);
  m_ = backend_.zeros({end - begin}, dtype);
  v_ = backend_.zeros({end - begin}, dtype);
}

void AdamW::step(Tensor& params, const Tensor& grads, double lr) {
  ++step_;
  AdamWHyper hyper;
  hyper.lr = static_cast<float>(lr);
  hyper.beta1 = static_cast<float>(options_.beta1);
  hyper.beta2 = static_cast<float>(options_.beta2);
  hyper.eps = static_cast<float>(options_.eps);
  hyper.step = step_;
  hyper.weight_decay = static_cast<float>(options_.weight_decay);
  backend_.adamw_update(params, grads, m_, v_, segments_, hyper);
}

}  // namespace troupe::compute
