#include "compute/model/parameter_source.hpp"

#include "compute/memory_ledger.hpp"

namespace troupe::compute {

ResidentParameters::ResidentParameters(Backend& backend, std::vector<ParameterUnit> units, DType dtype)
    : units_(std::move(units)) {
  TROUPE_CHECK(!units_.empty() && units_.front().begin == 0, "a stage's units start at 0");
  const std::int64_t total = units_.back().end;
  {
    MemoryScope scope(MemoryKind::parameters);
    params_ = backend.zeros({total}, dtype);
  }
  MemoryScope scope(MemoryKind::gradients);
  grads_ = backend.zeros({total}, dtype);
}

Tensor ResidentParameters::use(int unit, int) {
  const ParameterUnit& u = units_.at(static_cast<std::size_t>(unit));
  return params_.slice(u.begin, {u.size()});
}

Tensor ResidentParameters::gradient(int unit) {
  const ParameterUnit& u = units_.at(static_cast<std::size_t>(unit));
  return grads_.slice(u.begin, {u.size()});
}

}  // namespace troupe::compute
