#include "compute/context/context_attention.hpp"

#include <string>

#include "compute/context/head_all_to_all.hpp"
#include "compute/context/ring_attention.hpp"

namespace troupe::compute::context {

template <typename Real>
Expected<std::unique_ptr<ContextAttention<Real>>> make_context_attention(ContextMethod method,
                                                                         const ContextShape& shape,
                                                                         ContextExchange& exchange) {
  const int shards = exchange.shards();
  if (shards != shape.split.shards) {
    return Error{"context attention: a split over " + std::to_string(shape.split.shards) + " ranks on a group of " +
                 std::to_string(shards)};
  }
  if (method == ContextMethod::ring) return make_ring_attention<Real>(shape, exchange);
  if (shape.heads % shards != 0) {
    return Error{"context.method = all_to_all needs context.shards = " + std::to_string(shards) +
                 " to divide model.n_head = " + std::to_string(shape.heads)};
  }
  return make_head_all_to_all<Real>(shape, exchange);
}

template Expected<std::unique_ptr<ContextAttention<float>>> make_context_attention<float>(ContextMethod,
                                                                                          const ContextShape&,
                                                                                          ContextExchange&);
template Expected<std::unique_ptr<ContextAttention<double>>> make_context_attention<double>(ContextMethod,
                                                                                            const ContextShape&,
                                                                                            ContextExchange&);

}  // namespace troupe::compute::context
