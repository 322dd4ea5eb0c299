// The optimizer pieces on their own: the learning-rate schedule's shape, which views AdamW
// decays, ZeRO-style ranges that clip views, and global-norm clipping.

#include <catch2/catch.hpp>

#include <cmath>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/optim/adamw.hpp"
#include "compute/optim/grad_clip.hpp"
#include "compute/optim/lr_schedule.hpp"

using namespace troupe::compute;

TEST_CASE("learning rate warms up linearly, then follows a cosine to the minimum", "[optim]") {
  LrSchedule s{1e-3, 1e-4, 10, 110};
  CHECK(s.at(0) == Approx(1e-4));
  CHECK(s.at(4) == Approx(5e-4));
  CHECK(s.at(9) == Approx(1e-3));
  CHECK(s.at(10) == Approx(1e-3));
  CHECK(s.at(59) == Approx(1e-4 + 0.5 * (1e-3 - 1e-4) * (1 + std::cos(M_PI * 49.0 / 99.0))));
  CHECK(s.at(109) == Approx(1e-4));
  for (long i = 10; i < 109; ++i) CHECK(s.at(i + 1) <= s.at(i));
}

TEST_CASE("AdamW decays matrices but not biases or LayerNorm, and honours its range", "[optim]") {
  GPTConfig cfg{1, 4, 2, 3, 5, 5};
  ParameterLayout layout(cfg);
  CpuBackend backend(1);
  Tensor params = Tensor::zeros({layout.total()}, DType::f32), grads = Tensor::zeros({layout.total()}, DType::f32);
  for (std::int64_t i = 0; i < layout.total(); ++i) params.data_as<float>()[i] = 1.0f;
  // Zero gradients: the only change AdamW makes is weight decay, p *= 1 - lr * wd.
  const auto& bias = layout.find("h.0.attn.c_attn.bias");
  const auto& weight = layout.find("h.0.attn.c_attn.weight");
  AdamW opt(backend, layout, DType::f32, AdamWOptions{0.9, 0.95, 1e-8, 0.5}, weight.offset + 2, bias.offset + 1);
  opt.step(params, grads, 0.1);
  const float* p = params.data_as<float>();
  CHECK(p[weight.offset + 1] == 1.0f);                     // before the range: untouched
  CHECK(p[weight.offset + 2] == Approx(0.95f));            // decayed matrix element
  CHECK(p[bias.offset] == 1.0f);                           // bias inside the range: not decayed
  CHECK(p[bias.offset + 1] == 1.0f);                       // after the range: untouched
}

TEST_CASE("global-norm clipping caps the norm and keeps the direction", "[optim]") {
  CpuBackend backend(1);
  Tensor g = Tensor::zeros({2}, DType::f32);
  g.data_as<float>()[0] = 3;
  g.data_as<float>()[1] = 4;
  CHECK(clip_grad_norm(backend, g, 10.0) == Approx(5.0));
  CHECK(g.data_as<float>()[0] == 3.0f);
  CHECK(clip_grad_norm(backend, g, 1.0) == Approx(5.0));
  CHECK(g.data_as<float>()[0] == Approx(0.6f).epsilon(1e-5));
  CHECK(g.data_as<float>()[1] == Approx(0.8f).epsilon(1e-5));
}
