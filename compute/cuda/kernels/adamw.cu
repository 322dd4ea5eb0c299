// AdamW over many segments of the flat fp32 buffers in a few launches (multi-tensor, as apex's
// multi_tensor_apply): the host plans which chunk of which segment each block takes
// (multi_tensor_launch.hpp) and passes that table, the segments and the step's constants in the
// kernel's parameters. The per-element update is adamw.cpp's, with the bias corrections taken
// once per call in double.

#include <algorithm>
#include <cmath>
#include <vector>

#include "compute/cuda/cuda_check.hpp"
#include "compute/cuda/kernels/kernels.hpp"
#include "compute/cuda/launch_config.hpp"
#include "compute/cuda/multi_tensor_launch.hpp"

namespace troupe::compute::cuda {
namespace {

struct SegmentArgs {
  std::int64_t param_offset;
  std::int64_t moment_offset;
  std::int64_t count;
  float weight_decay;  // 0 for segments that do not decay
};

struct AdamWLaunchArgs {
  float* params;
  const float* grads;
  float* m;
  float* v;
  float lr, beta1, beta2, eps, correction1, correction2;
  SegmentArgs segments[kAdamWLimits.segments_per_launch];
  std::uint8_t block_segment[kAdamWLimits.blocks_per_launch];
  std::int32_t block_chunk[kAdamWLimits.blocks_per_launch];
};
// CUDA 12.1 raised the kernel-parameter limit from 4 KiB to 32 KiB (Volta on, with a 12.1
// driver); staying well under 4 KiB keeps the launch valid on older drivers too.
static_assert(sizeof(AdamWLaunchArgs) <= 3 * 1024, "AdamW launch arguments must stay well under 4 KiB");

// Each block reads its row of the tables and its segment straight from the parameter space.
__global__ void __launch_bounds__(kAdamWThreads) adamw_kernel(const AdamWLaunchArgs args) {
  const SegmentArgs segment = args.segments[args.block_segment[blockIdx.x]];
  const std::int64_t begin = std::int64_t{args.block_chunk[blockIdx.x]} * kAdamWLimits.chunk;
  const std::int64_t end = min(begin + kAdamWLimits.chunk, segment.count);
  float* param = args.params + segment.param_offset;
  const float* grad = args.grads + segment.param_offset;
  float* m = args.m + segment.moment_offset;
  float* v = args.v + segment.moment_offset;
  const float b1 = args.beta1, b2 = args.beta2, wd = segment.weight_decay;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float g = grad[i];
    const float mi = b1 * m[i] + (1.0f - b1) * g;
    const float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] -= args.lr * ((mi / args.correction1) / (sqrtf(vi / args.correction2) + args.eps) + wd * param[i]);
  }
}

}  // namespace

void adamw_update(float* params, const float* grads, float* m, float* v, const AdamWSegment* segments,
                  std::size_t segment_count, const AdamWHyper& hyper, cudaStream_t stream) {
  std::vector<std::int64_t> counts(segment_count);
  for (std::size_t i = 0; i < segment_count; ++i) counts[i] = segments[i].count;
  const auto step = static_cast<double>(hyper.step);
  AdamWLaunchArgs args{};
  args.params = params;
  args.grads = grads;
  args.m = m;
  args.v = v;
  args.lr = hyper.lr;
  args.beta1 = hyper.beta1;
  args.beta2 = hyper.beta2;
  args.eps = hyper.eps;
  args.correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(hyper.beta1), step));
  args.correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(hyper.beta2), step));
  // The arguments are copied when a launch is enqueued, so one struct serves every launch.
  for (const MultiTensorLaunch& launch : plan_multi_tensor_launches(counts, kAdamWLimits)) {
    for (std::size_t k = 0; k < launch.segments.size(); ++k) {
      const AdamWSegment& s = segments[launch.segments[k]];
      args.segments[k] = {s.param_offset, s.moment_offset, s.count, s.decay ? hyper.weight_decay : 0.0f};
    }
    std::copy(launch.block_segment.begin(), launch.block_segment.end(), args.block_segment);
    std::copy(launch.block_chunk.begin(), launch.block_chunk.end(), args.block_chunk);
    const auto blocks = static_cast<unsigned>(launch.block_chunk.size());
    adamw_kernel<<<blocks, kAdamWThreads, 0, stream>>>(args);
    TROUPE_CUDA_LAUNCHED();
  }
}

}  // namespace troupe::compute::cuda
