// Under train.precision bf16 the CPU backend stores the activations only the linear products read
// in bf16 (Backend::operand_storage_dtype): the ops that write them round their f32 results to
// nearest even, and the products take them as operands as they lie. The products round every f32
// operand the same way, so storing them rounded changes no result: each op below is held bit for
// bit against its f32 form, on this CPU's BF16 units (where it has them) and emulated, on 1 and 2
// threads; and a model stage under bf16 against the bytes it saves.

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "compute/cpu/bf16_products.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/cuda/bf16.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/model/memory_estimate.hpp"

namespace {

using namespace troupe::compute;
using troupe::compute::cpu::Bf16Units;

Tensor random_tensor(Shape shape, std::mt19937& rng, float scale = 1.0f) {
  Tensor t = Tensor::zeros(std::move(shape), DType::f32);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = uniform(rng);
  return t;
}

// The f32 tensor's values rounded to bf16 bits, as a bf16 tensor.
Tensor rounded(const Tensor& f32) {
  Tensor bits = Tensor::zeros(f32.shape(), DType::bf16);
  for (std::int64_t i = 0; i < f32.numel(); ++i)
    bits.data_as<std::uint16_t>()[i] = float_to_bf16_bits(f32.data_as<float>()[i]);
  return bits;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

std::vector<Bf16Units> units_to_check() {
  std::vector<Bf16Units> units{Bf16Units::emulated};
  if (cpu::bf16_units_of_this_cpu() == Bf16Units::hardware) units.push_back(Bf16Units::hardware);
  return units;
}

const char* units_name(Bf16Units units) { return units == Bf16Units::hardware ? "BF16 units" : "emulated"; }

// Rows enough for two threads to split them (cpu_backend.cpp's row grain is 16) and a tail.
constexpr int B = 3, T = 37, NH = 4, C = 48;

}  // namespace

TEST_CASE("ops writing an activation only the products read write, in bf16, the f32 op's values rounded",
          "[kernels][bf16]") {
  std::mt19937 rng(21);
  const Tensor inp = random_tensor({B, T, C}, rng, 3.0f), weight = random_tensor({C}, rng),
               bias = random_tensor({C}, rng), qkv = random_tensor({B, T, 3 * C}, rng, 2.0f);
  for (const Bf16Units units : units_to_check()) {
    for (const int threads : {1, 2}) {
      INFO(units_name(units) << ", " << threads << " thread(s)");
      CpuBackend backend(threads, Precision::bf16, units);
      REQUIRE(backend.operand_storage_dtype(DType::f32) == DType::bf16);
      REQUIRE(backend.operand_storage_dtype(DType::f64) == DType::f64);

      Tensor out = Tensor::zeros({B, T, C}, DType::f32), out16 = Tensor::zeros({B, T, C}, DType::bf16);
      Tensor mean = Tensor::zeros({B, T}, DType::f32), rstd = Tensor::zeros({B, T}, DType::f32);
      Tensor mean16 = Tensor::zeros({B, T}, DType::f32), rstd16 = Tensor::zeros({B, T}, DType::f32);
      backend.layernorm_forward(out, mean, rstd, inp, weight, bias);
      backend.layernorm_forward(out16, mean16, rstd16, inp, weight, bias);
      CHECK(same_bytes(out16, rounded(out)));
      CHECK(same_bytes(mean16, mean));
      CHECK(same_bytes(rstd16, rstd));

      Tensor gelu = Tensor::zeros({B, T, C}, DType::f32), gelu16 = Tensor::zeros({B, T, C}, DType::bf16);
      backend.gelu_forward(gelu, inp);
      backend.gelu_forward(gelu16, inp);
      CHECK(same_bytes(gelu16, rounded(gelu)));

      Tensor att = Tensor::zeros(backend.attention_state_shape(B, NH, T), DType::f32),
             att16 = Tensor::zeros(att.shape(), DType::f32);
      Tensor y = Tensor::zeros({B, T, C}, DType::f32), y16 = Tensor::zeros({B, T, C}, DType::bf16);
      backend.attention_forward(y, att, qkv, NH);
      backend.attention_forward(y16, att16, qkv, NH);
      CHECK(same_bytes(y16, rounded(y)));
      CHECK(same_bytes(att16, att));
    }
  }
}

TEST_CASE("the bf16 products take an operand stored in bf16 as they take the f32 one it was rounded from",
          "[kernels][bf16]") {
  constexpr int N = B * T, OC = 40;
  std::mt19937 rng(22);
  const Tensor inp = random_tensor({N, C}, rng), weight = random_tensor({OC, C}, rng), bias = random_tensor({OC}, rng),
               residual = random_tensor({N, OC}, rng), dout = random_tensor({N, OC}, rng);
  const Tensor inp16 = rounded(inp);
  for (const Bf16Units units : units_to_check()) {
    for (const int threads : {1, 2}) {
      INFO(units_name(units) << ", " << threads << " thread(s)");
      CpuBackend backend(threads, Precision::bf16, units);
      Tensor a = Tensor::zeros({N, OC}, DType::f32), b = Tensor::zeros({N, OC}, DType::f32);
      backend.matmul_forward(a, inp, weight, bias);
      backend.matmul_forward(b, inp16, weight, bias);
      CHECK(same_bytes(a, b));
      backend.matmul_residual_forward(a, inp, weight, bias, residual);
      backend.matmul_residual_forward(b, inp16, weight, bias, residual);
      CHECK(same_bytes(a, b));
      // Accumulated onto a gradient already there, as micro-batches do.
      Tensor dw = random_tensor({OC, C}, rng), dw16 = Tensor::zeros({OC, C}, DType::f32);
      std::memcpy(dw16.data(), dw.data(), dw.nbytes());
      Tensor db = Tensor::zeros({OC}, DType::f32), db16 = Tensor::zeros({OC}, DType::f32);
      backend.matmul_backward_weights(dw, db, dout, inp);
      backend.matmul_backward_weights(dw16, db16, dout, inp16);
      CHECK(same_bytes(dw, dw16));
      CHECK(same_bytes(db, db16));
    }
  }
}

TEST_CASE("without the bf16 products a bf16 operand is refused, and fp32 stores activations in f32",
          "[kernels][bf16]") {
  CpuBackend fp32(1, Precision::fp32);
  CHECK(fp32.operand_storage_dtype(DType::f32) == DType::f32);
  Tensor out = Tensor::zeros({4, 8}, DType::f32), inp16 = Tensor::zeros({4, 8}, DType::bf16),
         weight = Tensor::zeros({8, 8}, DType::f32);
  CHECK_THROWS_WITH(fp32.matmul_forward(out, inp16, weight, Tensor{}),
                    Catch::Contains("needs the bf16 products of train.precision bf16"));
}

TEST_CASE("a stage under bf16 stores what only the products read in bf16: the bytes it saves, as estimated",
          "[model][bf16]") {
  const GPTConfig config{2, 64, 4, 64, 256, 256};
  constexpr int batch = 4, seq = 64;
  auto stage_bytes = [&](Backend& backend, Recompute recompute) {
    TensorShardGroup group;
    GPTStage stage(config, backend, 0, config.n_layer, DType::f32, recompute, nullptr, group);
    stage.reserve(batch, seq);
    return stage.activation_bytes();
  };
  for (const Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full}) {
    INFO("recompute " << recompute_name(recompute));
    CpuBackend fp32(1, Precision::fp32), bf16(1, Precision::bf16);
    const double full = static_cast<double>(stage_bytes(fp32, recompute));
    const double stored = static_cast<double>(stage_bytes(bf16, recompute));
    // Per block ln1, atty, ln2 and fch_gelu (7 C of a token's 16 C), and ln_f, at 2 bytes not 4.
    StageFootprint footprint{0, config.n_layer, batch, seq, 1};
    footprint.recompute = recompute;
    const double estimated_full = estimate_training_memory(config, footprint).activation_bytes;
    footprint.operand_storage_bytes = 2;
    const double estimated_stored = estimate_training_memory(config, footprint).activation_bytes;
    CHECK(stored < full);
    CHECK(full - stored == Approx(estimated_full - estimated_stored));
    // Without recomputation: 2 bytes saved on each of 7 C a token in each block and C for ln_f.
    const double tokens = batch * seq, C = config.n_embd;
    if (recompute == Recompute::none) CHECK(full - stored == 2 * tokens * (config.n_layer * 7 * C + C));
  }
}

// The figure docs/precision.md gives: `small` at batch 8 x 256, one rank, no recomputation.
TEST_CASE("small under bf16 holds 0.80 of fp32's activation bytes", "[model][bf16]") {
  const GPTConfig small = *gpt_preset("small");
  auto stage_bytes = [&](Backend& backend) {
    TensorShardGroup group;
    GPTStage stage(small, backend, 0, small.n_layer, DType::f32, Recompute::none, nullptr, group);
    stage.reserve(8, 256);
    return static_cast<double>(stage.activation_bytes());
  };
  CpuBackend fp32(1, Precision::fp32), bf16(1, Precision::bf16);
  const double ratio = stage_bytes(bf16) / stage_bytes(fp32);
  INFO("bf16 / fp32 activation bytes " << ratio);
  CHECK(ratio == Approx(0.80).margin(0.005));
}
