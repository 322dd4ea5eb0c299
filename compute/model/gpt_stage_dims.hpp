#pragma once
// One micro-batch's shapes inside a GPTStage's buffers: shared by gpt_stage.cpp and the split
// backward's weight half (gpt_stage_weights.cpp); nothing outside the stage includes it.

#include <cstdint>

#include "compute/model/gpt_stage.hpp"

namespace troupe::compute {

inline constexpr std::size_t kBlockTensors = 12;  // per layer, in parameter_layout.cpp's order

struct GPTStage::Dims {
  std::int64_t B, T;
  Shape att;  // the backend's attention_state_shape for (B, NH, T)
  std::int64_t segments = 1, seg = 0;
  std::int64_t local_T() const { return T / segments; }
  Tensor bt(const Tensor& buffer, std::int64_t width) const { return buffer.slice(0, {B, T, width}); }
  Tensor bhtt(const Tensor& buffer) const { return buffer.slice(0, att); }
  Tensor bt_only(const Tensor& buffer) const { return buffer.slice(0, {B, T}); }
  // A residual-stream buffer: this rank's rows.
  Tensor stream(const Tensor& buffer, std::int64_t width) const { return buffer.slice(0, {B, local_T(), width}); }
  Tensor stream_only(const Tensor& buffer) const { return buffer.slice(0, {B, local_T()}); }
  // This rank's rows inside a buffer of all B·T rows.
  Tensor own(const Tensor& full, std::int64_t width) const {
    return full.slice(seg * B * local_T() * width, {B, local_T(), width});
  }
};

}  // namespace troupe::compute
