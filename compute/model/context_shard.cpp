#include "compute/model/context_shard.hpp"

#include <stdexcept>
#include <string>
#include <variant>

namespace troupe::compute {

// One layer's ContextAttention in the stage's dtype, made for the batch size it last ran.
struct ContextLayers::Attention {
  int B = 0;
  std::variant<std::unique_ptr<context::ContextAttention<float>>, std::unique_ptr<context::ContextAttention<double>>>
      impl;
};

namespace {

void check(const Status& status) {
  // A failed exchange ends the step. (An exchange over a data plane reports a lost peer by its own
  // exception, which the runtime recovers from, before a status reaches here.)
  if (!status) throw std::runtime_error(status.error().message);
}

template <typename Real>
std::unique_ptr<context::ContextAttention<Real>> made(context::ContextMethod method, const context::ContextShape& shape,
                                                      context::ContextExchange& exchange) {
  auto attention = context::make_context_attention<Real>(method, shape, exchange);
  if (!attention) throw std::invalid_argument(attention.error().message);
  return std::move(*attention);
}

}  // namespace

ContextLayers::ContextLayers(ContextShardGroup group, int layers, int heads, int channels, DType dtype)
    : group_(group), layer_count_(layers), heads_(heads), channels_(channels), dtype_(dtype) {
  TROUPE_CHECK(group_.sharded(), "context layers without a context group");
  TROUPE_CHECK(dtype == DType::f32 || dtype == DType::f64, "context attention runs in f32 or f64");
}

ContextLayers::~ContextLayers() = default;

ContextLayers::Attention& ContextLayers::layer(int index, int B) {
  TROUPE_CHECK(0 <= index && index < layer_count_ && slot_ >= 0, "context attention of layer " + std::to_string(index));
  const auto at = static_cast<std::size_t>(slot_ * layer_count_ + index);
  while (layers_.size() <= at) layers_.push_back(std::make_unique<Attention>());
  Attention& a = *layers_[at];
  if (a.B != B) {
    const context::ContextShape shape{B, channels_, heads_, group_.split};
    if (dtype_ == DType::f32)
      a.impl = made<float>(group_.method, shape, *group_.exchange);
    else
      a.impl = made<double>(group_.method, shape, *group_.exchange);
    a.B = B;
  }
  return a;
}

void ContextLayers::attention_forward(int layer_index, Tensor& out, const Tensor& qkv) {
  TROUPE_CHECK(qkv.device() == Device::cpu && qkv.dim(1) == group_.split.local_rows(),
               "context attention of " + qkv.describe());
  Attention& a = layer(layer_index, static_cast<int>(qkv.dim(0)));
  std::visit(
      [&](auto& impl) {
        using Real = typename std::remove_reference_t<decltype(*impl)>::value_type;
        check(impl->forward(out.data_as<Real>(), qkv.data_as<Real>()));
      },
      a.impl);
}

void ContextLayers::attention_backward(int layer_index, Tensor& dqkv, const Tensor& dout, const Tensor& qkv) {
  Attention& a = layer(layer_index, static_cast<int>(qkv.dim(0)));
  std::visit(
      [&](auto& impl) {
        using Real = typename std::remove_reference_t<decltype(*impl)>::value_type;
        check(impl->backward(dqkv.data_as<Real>(), dout.data_as<Real>(), qkv.data_as<Real>()));
      },
      a.impl);
}

Tensor ContextLayers::positions_of(const Tensor& table, int half) const {
  const std::int64_t c = group_.split.chunk(), width = table.dim(1);
  return table.slice(group_.split.chunk_of(group_.rank(), half) * c * width, {c, width});
}

Tensor ContextLayers::positions(Backend& backend, const Tensor& wpe, std::int64_t rows) {
  const std::int64_t c = group_.split.chunk(), width = wpe.dim(1);
  if (!local_wpe_.defined()) local_wpe_ = backend.zeros({2 * c, width}, wpe.dtype());
  for (int half = 0; half < 2; ++half) {
    Tensor local = local_wpe_.slice(half * c * width, {c, width});
    backend.copy(local, positions_of(wpe, half));
  }
  return local_wpe_.slice(0, {rows, width});
}

Tensor ContextLayers::position_grads(Backend& backend, const Tensor& dwpe, std::int64_t rows) {
  const std::int64_t c = group_.split.chunk(), width = dwpe.dim(1);
  if (!local_dwpe_.defined()) local_dwpe_ = backend.zeros({2 * c, width}, dwpe.dtype());
  backend.fill_zero(local_dwpe_);
  return local_dwpe_.slice(0, {rows, width});
}

void ContextLayers::add_position_grads(Backend& backend, Tensor& dwpe) {
  const std::int64_t c = group_.split.chunk(), width = dwpe.dim(1);
  for (int half = 0; half < 2; ++half) {
    Tensor rows = positions_of(dwpe, half);
    backend.residual_forward(rows, rows, local_dwpe_.slice(half * c * width, {c, width}));
  }
}

}  // namespace troupe::compute
