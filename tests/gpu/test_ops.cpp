// Each CUDA op against the CPU backend on random inputs, forward and backward: fp32 within 1e-5
// relative (max |gpu - cpu| / max |cpu|), the bf16 GEMMs within 1e-2. Outputs written with = start
// as NaN on the device; outputs accumulated with += start from the same random values on both.

#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "compute/cuda/bf16.hpp"
#include "compute/cuda/kernels/kernels.hpp"
#include "compute/cuda/launch_config.hpp"
#include "gpu/gpu_support.hpp"

namespace troupe::tests {
namespace {

using compute::CudaBackend;
using compute::DType;
using compute::Tensor;

constexpr double kFp32 = 1e-5;
constexpr double kBf16 = 1e-2;

struct Backends {
  compute::CpuBackend cpu{1};
  std::unique_ptr<CudaBackend> gpu = cuda_backend(compute::Precision::fp32);
};

}  // namespace

TEST_CASE("cuda encoder forward and backward equal the cpu's, the backward bit for bit however often a token repeats",
          "[gpu]") {
  Backends b;
  // 51 positions over 50 tokens repeat a few; over 3 tokens, each token many times.
  const int V = GENERATE(50, 3);
  const int B = 3, T = 17, C = 40, maxT = 20;
  Tensor tokens = ids_host({B, T}, V, 1), wte = random_host({V, C}, 2), wpe = random_host({maxT, C}, 3);
  Tensor out = Tensor::zeros({B, T, C}, DType::f32);
  b.cpu.encoder_forward(out, tokens, wte, wpe);
  Tensor d_out = poisoned(*b.gpu, {B, T, C}), d_tokens = to_device(*b.gpu, tokens);
  b.gpu->encoder_forward(d_out, d_tokens, to_device(*b.gpu, wte), to_device(*b.gpu, wpe));
  require_close(*b.gpu, d_out, out, kFp32, "encoder out");

  Tensor dout = random_host({B, T, C}, 4), dwte = random_host({V, C}, 5), dwpe = random_host({maxT, C}, 6);
  Tensor d_dwte = to_device(*b.gpu, dwte), d_dwpe = to_device(*b.gpu, dwpe);
  b.cpu.encoder_backward(dwte, dwpe, dout, tokens);
  b.gpu->encoder_backward(d_dwte, d_dwpe, to_device(*b.gpu, dout), d_tokens);
  // Each row's positions are added in order, as on the CPU: no rounding differs.
  require_close(*b.gpu, d_dwte, dwte, 0.0, "dwte");
  require_close(*b.gpu, d_dwpe, dwpe, 0.0, "dwpe");
}

TEST_CASE("cuda layernorm forward and backward equal the cpu's", "[gpu]") {
  Backends b;
  const int N = 67, C = 200;
  Tensor inp = random_host({N, C}, 1, 3.0), w = random_host({C}, 2), bias = random_host({C}, 3);
  Tensor out = Tensor::zeros({N, C}, DType::f32), mean = Tensor::zeros({N}, DType::f32),
         rstd = Tensor::zeros({N}, DType::f32);
  b.cpu.layernorm_forward(out, mean, rstd, inp, w, bias);
  Tensor d_inp = to_device(*b.gpu, inp), d_w = to_device(*b.gpu, w);
  Tensor d_out = poisoned(*b.gpu, {N, C}), d_mean = poisoned(*b.gpu, {N}), d_rstd = poisoned(*b.gpu, {N});
  b.gpu->layernorm_forward(d_out, d_mean, d_rstd, d_inp, d_w, to_device(*b.gpu, bias));
  require_close(*b.gpu, d_out, out, kFp32, "layernorm out");
  require_close(*b.gpu, d_mean, mean, kFp32, "mean");
  require_close(*b.gpu, d_rstd, rstd, kFp32, "rstd");

  Tensor dout = random_host({N, C}, 4), dinp = random_host({N, C}, 5), dw = random_host({C}, 6),
         db = random_host({C}, 7);
  Tensor d_dinp = to_device(*b.gpu, dinp), d_dw = to_device(*b.gpu, dw), d_db = to_device(*b.gpu, db);
  b.cpu.layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd);
  b.gpu->layernorm_backward(d_dinp, d_dw, d_db, to_device(*b.gpu, dout), d_inp, d_w, d_mean, d_rstd);
  require_close(*b.gpu, d_dinp, dinp, kFp32, "layernorm dinp");
  require_close(*b.gpu, d_dw, dw, kFp32, "layernorm dweight");
  require_close(*b.gpu, d_db, db, kFp32, "layernorm dbias");
}

TEST_CASE("cuda matmul forward and backward equal the cpu's, fp32 and bf16", "[gpu]") {
  compute::CpuBackend cpu(1);
  const auto precision = GENERATE(compute::Precision::fp32, compute::Precision::bf16);
  const double tolerance = precision == compute::Precision::fp32 ? kFp32 : kBf16;
  auto gpu = cuda_backend(precision);
  const bool with_bias = GENERATE(true, false);
  const int N = 70, C = 96, OC = 130;
  INFO("precision " << gpu->name() << ", bias " << with_bias);
  Tensor inp = random_host({N, C}, 1), w = random_host({OC, C}, 2, 0.1), bias = random_host({OC}, 3);
  Tensor out = Tensor::zeros({N, OC}, DType::f32), no_bias;
  cpu.matmul_forward(out, inp, w, with_bias ? bias : no_bias);
  Tensor d_inp = to_device(*gpu, inp), d_w = to_device(*gpu, w), d_out = poisoned(*gpu, {N, OC});
  gpu->matmul_forward(d_out, d_inp, d_w, with_bias ? to_device(*gpu, bias) : no_bias);
  require_close(*gpu, d_out, out, tolerance, "matmul out");

  Tensor dout = random_host({N, OC}, 4), dinp = Tensor::zeros({N, C}, DType::f32), dw = random_host({OC, C}, 5),
         db = random_host({OC}, 6);
  Tensor d_dinp = poisoned(*gpu, {N, C}), d_dw = to_device(*gpu, dw), d_db = with_bias ? to_device(*gpu, db) : no_bias;
  Tensor cpu_db = with_bias ? db : no_bias;
  cpu.matmul_backward(dinp, dw, cpu_db, dout, inp, w);
  gpu->matmul_backward(d_dinp, d_dw, d_db, to_device(*gpu, dout), d_inp, d_w);
  require_close(*gpu, d_dinp, dinp, tolerance, "matmul dinp");
  require_close(*gpu, d_dw, dw, tolerance, "matmul dweight");
  if (with_bias) require_close(*gpu, d_db, db, kFp32, "matmul dbias");  // a column sum: fp32 in both modes
}

TEST_CASE("cuda attention forward and backward equal the cpu's, fp32 (flash) and bf16 (batched GEMMs)", "[gpu]") {
  compute::CpuBackend cpu(1);
  const auto precision = GENERATE(compute::Precision::fp32, compute::Precision::bf16);
  const double tolerance = precision == compute::Precision::fp32 ? kFp32 : kBf16;
  auto gpu = cuda_backend(precision);
  // fp32: head sizes 32 and 64 run the flash kernels bounded by 64, 128 the other; T crosses
  // tile edges. bf16: the last shape's (T, T) scores of 60 heads exceed the scratch bound, so
  // the heads go in two chunks.
  const auto [B, T, C, NH] = GENERATE(std::tuple{2, 130, 96, 3}, std::tuple{1, 64, 128, 2}, std::tuple{2, 70, 256, 2},
                                      std::tuple{2, 1100, 240, 30});
  INFO(gpu->name() << ": B " << B << " T " << T << " C " << C << " NH " << NH);
  Tensor qkv = random_host({B, T, 3 * C}, 1);
  Tensor out = Tensor::zeros({B, T, C}, DType::f32);
  Tensor att = Tensor::zeros(cpu.attention_state_shape(B, NH, T), DType::f32);
  cpu.attention_forward(out, att, qkv, NH);
  const compute::Shape state = gpu->attention_state_shape(B, NH, T);
  REQUIRE(state == compute::Shape{B, NH, T});
  Tensor d_qkv = to_device(*gpu, qkv), d_out = poisoned(*gpu, {B, T, C}), d_att = poisoned(*gpu, state);
  gpu->attention_forward(d_out, d_att, d_qkv, NH);
  require_close(*gpu, d_out, out, tolerance, "attention out");

  Tensor dout = random_host({B, T, C}, 2), dqkv = Tensor::zeros({B, T, 3 * C}, DType::f32),
         datt = Tensor::zeros(att.shape(), DType::f32);
  cpu.attention_backward(dqkv, datt, dout, qkv, att, NH);
  Tensor d_dqkv = poisoned(*gpu, {B, T, 3 * C}), d_datt = poisoned(*gpu, state);
  gpu->attention_backward(d_dqkv, d_datt, to_device(*gpu, dout), d_qkv, d_att, NH);
  require_close(*gpu, d_dqkv, dqkv, tolerance, "attention dqkv");
}

TEST_CASE("cuda gelu and residual equal the cpu's", "[gpu]") {
  Backends b;
  const int n = 1000;
  Tensor inp = random_host({n}, 1, 3.0), dout = random_host({n}, 2), other = random_host({n}, 3);
  Tensor out = Tensor::zeros({n}, DType::f32), dinp = Tensor::zeros({n}, DType::f32),
         sum = Tensor::zeros({n}, DType::f32);
  b.cpu.gelu_forward(out, inp);
  b.cpu.gelu_backward(dinp, inp, dout);
  b.cpu.residual_forward(sum, inp, other);
  Tensor d_inp = to_device(*b.gpu, inp), d_out = poisoned(*b.gpu, {n}), d_dinp = poisoned(*b.gpu, {n}),
         d_sum = poisoned(*b.gpu, {n});
  b.gpu->gelu_forward(d_out, d_inp);
  b.gpu->gelu_backward(d_dinp, d_inp, to_device(*b.gpu, dout));
  b.gpu->residual_forward(d_sum, d_inp, to_device(*b.gpu, other));
  require_close(*b.gpu, d_out, out, kFp32, "gelu");
  require_close(*b.gpu, d_dinp, dinp, kFp32, "gelu dinp");
  require_close(*b.gpu, d_sum, sum, kFp32, "residual");
}

TEST_CASE("cuda cross-entropy forward and backward equal the cpu's", "[gpu]") {
  Backends b;
  const int N = 37, V = 67, Vp = 80;
  Tensor logits = random_host({N, Vp}, 1, 4.0), targets = ids_host({N}, V, 2);
  Tensor losses = Tensor::zeros({N}, DType::f32), probs = Tensor::zeros({N, Vp}, DType::f32);
  b.cpu.crossentropy_forward(losses, probs, logits, targets, V);
  Tensor d_targets = to_device(*b.gpu, targets), d_losses = poisoned(*b.gpu, {N}), d_probs = poisoned(*b.gpu, {N, Vp});
  b.gpu->crossentropy_forward(d_losses, d_probs, to_device(*b.gpu, logits), d_targets, V);
  require_close(*b.gpu, d_losses, losses, kFp32, "losses");
  require_close(*b.gpu, d_probs, probs, kFp32, "probs");

  Tensor dlogits = Tensor::zeros({N, Vp}, DType::f32), d_dlogits = poisoned(*b.gpu, {N, Vp});
  b.cpu.crossentropy_backward(dlogits, probs, targets, 0.25f);
  b.gpu->crossentropy_backward(d_dlogits, d_probs, d_targets, 0.25f);
  require_close(*b.gpu, d_dlogits, dlogits, kFp32, "dlogits");
}

TEST_CASE("cuda adamw over many segments, sum of squares and scale equal the cpu's", "[gpu]") {
  Backends b;
  // Segments as AdamW makes them (some decay, some not; moments packed apart from the
  // parameters): first one longer than a launch's blocks cover, then more than a launch's
  // segments, so the multi-tensor plan closes launches for both reasons. The gaps between
  // parameter segments hold NaN gradients: an update outside the segments turns a parameter NaN.
  const compute::cuda::MultiTensorLimits limits = compute::cuda::kAdamWLimits;
  std::vector<compute::AdamWSegment> segments;
  std::int64_t params = 0, moments = 0;
  auto add = [&](std::int64_t count, bool decay) {
    constexpr std::int64_t kGap = 3;
    segments.push_back({params + kGap, moments, count, decay});
    params += kGap + count;
    moments += count;
  };
  add(limits.blocks_per_launch * limits.chunk + 1000, true);
  for (int i = 0; i < limits.segments_per_launch + 8; ++i) add(1 + 977 * i, i % 3 == 0);
  add(limits.chunk, false);

  Tensor p = random_host({params}, 1), g = random_host({params}, 2);
  Tensor m = random_host({moments}, 3, 0.1), v = random_host({moments}, 4);
  for (std::int64_t i = 0; i < moments; ++i) v.data_as<float>()[i] *= v.data_as<float>()[i];  // second moments >= 0
  std::vector<bool> in_segment(static_cast<std::size_t>(params), false);
  for (const auto& s : segments) std::fill_n(in_segment.begin() + s.param_offset, s.count, true);
  for (std::int64_t i = 0; i < params; ++i)
    if (!in_segment[static_cast<std::size_t>(i)]) g.data_as<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  Tensor d_p = to_device(*b.gpu, p), d_g = to_device(*b.gpu, g), d_m = to_device(*b.gpu, m), d_v = to_device(*b.gpu, v);
  for (long step = 1; step <= 3; ++step) {
    const compute::AdamWHyper hyper{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step};
    b.cpu.adamw_update(p, g, m, v, segments, hyper);
    b.gpu->adamw_update(d_p, d_g, d_m, d_v, segments, hyper);
  }
  require_close(*b.gpu, d_p, p, kFp32, "params");
  require_close(*b.gpu, d_m, m, kFp32, "m");
  require_close(*b.gpu, d_v, v, kFp32, "v");

  const int n = 5000;
  Tensor x = random_host({n}, 5);
  Tensor d_x = to_device(*b.gpu, x);
  const double cpu_sum = b.cpu.sum_of_squares(x), gpu_sum = b.gpu->sum_of_squares(d_x);
  REQUIRE(std::abs(gpu_sum - cpu_sum) <= 1e-9 * cpu_sum);
  b.cpu.scale(x, 0.37f);
  b.gpu->scale(d_x, 0.37f);
  require_close(*b.gpu, d_x, x, kFp32, "scaled");
}

TEST_CASE("cuda bf16 rounding equals the host's round-to-nearest-even bit for bit", "[gpu]") {
  auto gpu = cuda_backend(compute::Precision::bf16);
  Tensor x = random_host({4096}, 1, 100.0);
  const float specials[] = {0.0f, -0.0f, 1.0f, 1.00390625f, 1.01171875f, 3.0e38f, -3.0e38f,
                            std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), 1e-40f};
  for (std::size_t i = 0; i < std::size(specials); ++i) x.data_as<float>()[i] = specials[i];
  Tensor d_x = to_device(*gpu, x), d_bits = gpu->zeros({x.numel()}, DType::bf16);
  compute::cuda::to_bf16(static_cast<std::uint16_t*>(d_bits.data()), d_x.data_as<float>(), x.numel(), gpu->stream());
  Tensor bits = to_host(*gpu, d_bits);
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const std::uint16_t want = compute::float_to_bf16_bits(x.data_as<float>()[i]);
    const std::uint16_t got = static_cast<const std::uint16_t*>(bits.data())[i];
    const bool both_nan = (want & 0x7fff) > 0x7f80 && (got & 0x7fff) > 0x7f80;
    if (got != want && !both_nan) ++differ;
  }
  REQUIRE(differ == 0);
}

}  // namespace troupe::tests
