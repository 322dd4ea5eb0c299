// Under train.precision bf16 the CPU backend stores a stage's activations, but for the LayerNorm
// statistics and the attention state, in bf16 (Backend::activation_storage_dtype): the ops that
// write them compute in f32 and round to nearest even, the residual stream is summed in f32 and a
// copy kept rounded (store), the products take them as operands as they lie (they round every f32
// operand the same way), and the attention, GELU and LayerNorm backward widen what they read back
// to f32. So each op is held bit for bit against its f32 form on the
// same values: an output to the f32 output rounded, an op reading a bf16 input to the f32 op on
// that input widened; on this CPU's BF16 units (where it has them) and emulated, on 1 and 2
// threads. And a model stage under bf16 against the bytes it saves.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "compute/cpu/bf16_products.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/cuda/bf16.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/model/memory_estimate.hpp"
#include "support/bf16_units.hpp"
#include "support/random_tensor.hpp"

namespace {

using troupe::test::bf16_units_name;
using troupe::test::bf16_units_to_check;
using troupe::test::uniform_f32;

using namespace troupe::compute;
using troupe::compute::cpu::Bf16Units;

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

// Rows enough for two threads to split them (cpu_backend.cpp's row grain is 16) and a tail.
constexpr int kBatch = 3, kSeq = 37, kHeads = 4, kChannels = 48;

// The bf16 tensor's values widened to f32.
Tensor widened(const Tensor& bf16) {
  Tensor f32 = Tensor::zeros(bf16.shape(), DType::f32);
  for (std::int64_t i = 0; i < bf16.numel(); ++i)
    f32.data_as<float>()[i] = bf16_bits_to_float(bf16.data_as<std::uint16_t>()[i]);
  return f32;
}

}  // namespace

TEST_CASE("ops writing an activation only the products read write, in bf16, the f32 op's values rounded",
          "[kernels][bf16]") {
  std::mt19937 rng(21);
  const Tensor inp = uniform_f32({kBatch, kSeq, kChannels}, rng, 3.0f), weight = uniform_f32({kChannels}, rng),
               bias = uniform_f32({kChannels}, rng), qkv = uniform_f32({kBatch, kSeq, 3 * kChannels}, rng, 2.0f);
  for (const Bf16Units units : bf16_units_to_check()) {
    for (const int threads : {1, 2}) {
      INFO(bf16_units_name(units) << ", " << threads << " thread(s)");
      CpuBackend backend(threads, Precision::bf16, units);
      REQUIRE(backend.activation_storage_dtype(DType::f32) == DType::bf16);
      REQUIRE(backend.activation_storage_dtype(DType::f64) == DType::f64);

      Tensor out = Tensor::zeros({kBatch, kSeq, kChannels}, DType::f32),
             out16 = Tensor::zeros({kBatch, kSeq, kChannels}, DType::bf16);
      Tensor mean = Tensor::zeros({kBatch, kSeq}, DType::f32), rstd = Tensor::zeros({kBatch, kSeq}, DType::f32);
      Tensor mean16 = Tensor::zeros({kBatch, kSeq}, DType::f32), rstd16 = Tensor::zeros({kBatch, kSeq}, DType::f32);
      backend.layernorm_forward(out, mean, rstd, inp, weight, bias);
      backend.layernorm_forward(out16, mean16, rstd16, inp, weight, bias);
      CHECK(same_bytes(out16, rounded(out)));
      CHECK(same_bytes(mean16, mean));
      CHECK(same_bytes(rstd16, rstd));

      Tensor gelu = Tensor::zeros({kBatch, kSeq, kChannels}, DType::f32),
             gelu16 = Tensor::zeros({kBatch, kSeq, kChannels}, DType::bf16);
      backend.gelu_forward(gelu, inp);
      backend.gelu_forward(gelu16, inp);
      CHECK(same_bytes(gelu16, rounded(gelu)));

      Tensor att = Tensor::zeros(backend.attention_state_shape(kBatch, kHeads, kSeq), DType::f32),
             att16 = Tensor::zeros(att.shape(), DType::f32);
      Tensor y = Tensor::zeros({kBatch, kSeq, kChannels}, DType::f32),
             y16 = Tensor::zeros({kBatch, kSeq, kChannels}, DType::bf16);
      backend.attention_forward(y, att, qkv, kHeads);
      backend.attention_forward(y16, att16, qkv, kHeads);
      CHECK(same_bytes(y16, rounded(y)));
      CHECK(same_bytes(att16, att));
    }
  }
}

TEST_CASE("the bf16 products take an operand stored in bf16 as they take the f32 one it was rounded from",
          "[kernels][bf16]") {
  constexpr int N = kBatch * kSeq, OC = 40;
  std::mt19937 rng(22);
  const Tensor inp = uniform_f32({N, kChannels}, rng), weight = uniform_f32({OC, kChannels}, rng),
               bias = uniform_f32({OC}, rng), residual = uniform_f32({N, OC}, rng), dout = uniform_f32({N, OC}, rng);
  const Tensor inp16 = rounded(inp);
  for (const Bf16Units units : bf16_units_to_check()) {
    for (const int threads : {1, 2}) {
      INFO(bf16_units_name(units) << ", " << threads << " thread(s)");
      CpuBackend backend(threads, Precision::bf16, units);
      Tensor a = Tensor::zeros({N, OC}, DType::f32), b = Tensor::zeros({N, OC}, DType::f32);
      backend.matmul_forward(a, inp, weight, bias);
      backend.matmul_forward(b, inp16, weight, bias);
      CHECK(same_bytes(a, b));
      backend.matmul_residual_forward(a, inp, weight, bias, residual);
      backend.matmul_residual_forward(b, inp16, weight, bias, residual);
      CHECK(same_bytes(a, b));
      // Accumulated onto a gradient already there, as micro-batches do.
      Tensor dw = uniform_f32({OC, kChannels}, rng), dw16 = Tensor::zeros({OC, kChannels}, DType::f32);
      std::memcpy(dw16.data(), dw.data(), dw.nbytes());
      Tensor db = Tensor::zeros({OC}, DType::f32), db16 = Tensor::zeros({OC}, DType::f32);
      backend.matmul_backward_weights(dw, db, dout, inp);
      backend.matmul_backward_weights(dw16, db16, dout, inp16);
      CHECK(same_bytes(dw, dw16));
      CHECK(same_bytes(db, db16));
    }
  }
}

TEST_CASE("a product writes its output in bf16 as its f32 output rounded, over blocks of rows", "[kernels][bf16]") {
  constexpr int OC = 40;
  std::mt19937 rng(23);
  for (const int N : {kBatch * kSeq, 600}) {  // one block of rows, and three (cpu_backend.cpp's blocks are 256)
    const Tensor inp = uniform_f32({N, kChannels}, rng), weight = uniform_f32({OC, kChannels}, rng),
                 bias = uniform_f32({OC}, rng);
    const Tensor inp16 = rounded(inp);
    for (const Bf16Units units : bf16_units_to_check()) {
      for (const int threads : {1, 2}) {
        INFO(bf16_units_name(units) << ", " << threads << " thread(s), " << N << " rows");
        CpuBackend backend(threads, Precision::bf16, units);
        Tensor f32 = Tensor::zeros({N, OC}, DType::f32), bf16 = Tensor::zeros({N, OC}, DType::bf16);
        for (const Tensor& with_bias : {bias, Tensor{}}) {
          backend.matmul_forward(f32, inp, weight, with_bias);
          backend.matmul_forward(bf16, inp, weight, with_bias);
          CHECK(same_bytes(bf16, rounded(f32)));
          backend.matmul_forward(bf16, inp16, weight, with_bias);  // and from an operand stored in bf16
          CHECK(same_bytes(bf16, rounded(f32)));
        }
      }
    }
  }
}

TEST_CASE("the attention and GELU read an input stored in bf16 as the f32 ops read it widened", "[kernels][bf16]") {
  std::mt19937 rng(24);
  const Tensor qkv16 = rounded(uniform_f32({kBatch, kSeq, 3 * kChannels}, rng, 2.0f)),
               fch16 = rounded(uniform_f32({kBatch, kSeq, kChannels}, rng, 3.0f));
  const Tensor qkv = widened(qkv16), fch = widened(fch16);
  const Tensor dy = uniform_f32({kBatch, kSeq, kChannels}, rng);
  for (const Bf16Units units : bf16_units_to_check()) {
    for (const int threads : {1, 2}) {
      INFO(bf16_units_name(units) << ", " << threads << " thread(s)");
      CpuBackend backend(threads, Precision::bf16, units);
      const Shape state = backend.attention_state_shape(kBatch, kHeads, kSeq);
      Tensor y = Tensor::zeros({kBatch, kSeq, kChannels}, DType::f32), att = Tensor::zeros(state, DType::f32);
      backend.attention_forward(y, att, qkv, kHeads);
      // Into f32 (a selective recompute's refill) and into bf16 (the slot's atty).
      Tensor y32 = Tensor::zeros({kBatch, kSeq, kChannels}, DType::f32),
             y16 = Tensor::zeros({kBatch, kSeq, kChannels}, DType::bf16);
      Tensor att32 = Tensor::zeros(state, DType::f32), att16 = Tensor::zeros(state, DType::f32);
      backend.attention_forward(y32, att32, qkv16, kHeads);
      backend.attention_forward(y16, att16, qkv16, kHeads);
      CHECK(same_bytes(y32, y));
      CHECK(same_bytes(att32, att));
      CHECK(same_bytes(y16, rounded(y)));
      CHECK(same_bytes(att16, att));
      Tensor dqkv = Tensor::zeros({kBatch, kSeq, 3 * kChannels}, DType::f32), datt = Tensor::zeros(state, DType::f32);
      Tensor dqkv16 = Tensor::zeros({kBatch, kSeq, 3 * kChannels}, DType::f32),
             datt16 = Tensor::zeros(state, DType::f32);
      backend.attention_backward(dqkv, datt, dy, qkv, att, kHeads);
      backend.attention_backward(dqkv16, datt16, dy, qkv16, att, kHeads);
      CHECK(same_bytes(dqkv16, dqkv));
      CHECK(same_bytes(datt16, datt));

      Tensor g = Tensor::zeros({kBatch, kSeq, kChannels}, DType::f32),
             g32 = Tensor::zeros({kBatch, kSeq, kChannels}, DType::f32),
             g16 = Tensor::zeros({kBatch, kSeq, kChannels}, DType::bf16);
      backend.gelu_forward(g, fch);
      backend.gelu_forward(g32, fch16);
      backend.gelu_forward(g16, fch16);
      CHECK(same_bytes(g32, g));
      CHECK(same_bytes(g16, rounded(g)));
      Tensor dfch = Tensor::zeros({kBatch, kSeq, kChannels}, DType::f32),
             dfch16 = Tensor::zeros({kBatch, kSeq, kChannels}, DType::f32);
      Tensor dbias = uniform_f32({kChannels}, rng), dbias16 = Tensor::zeros({kChannels}, DType::f32);
      std::memcpy(dbias16.data(), dbias.data(), dbias.nbytes());
      backend.gelu_bias_backward(dfch, dbias, fch, dy);
      backend.gelu_bias_backward(dfch16, dbias16, fch16, dy);
      CHECK(same_bytes(dfch16, dfch));
      CHECK(same_bytes(dbias16, dbias));
    }
  }
}

TEST_CASE("without the bf16 products a bf16 operand is refused, and fp32 stores activations in f32",
          "[kernels][bf16]") {
  CpuBackend fp32(1, Precision::fp32);
  CHECK(fp32.activation_storage_dtype(DType::f32) == DType::f32);
  Tensor out = Tensor::zeros({4, 8}, DType::f32), inp16 = Tensor::zeros({4, 8}, DType::bf16),
         weight = Tensor::zeros({8, 8}, DType::f32);
  CHECK_THROWS_WITH(fp32.matmul_forward(out, inp16, weight, Tensor{}),
                    Catch::Contains("needs the bf16 products of train.precision bf16"));
}

TEST_CASE("LayerNorm's backward reads an input stored in bf16 as the f32 op reads it widened, and store() rounds",
          "[kernels][bf16]") {
  std::mt19937 rng(26);
  const Tensor stream = uniform_f32({kBatch, kSeq, kChannels}, rng, 3.0f), weight = uniform_f32({kChannels}, rng),
               bias = uniform_f32({kChannels}, rng), dout = uniform_f32({kBatch, kSeq, kChannels}, rng);
  const Tensor stream16 = rounded(stream), widened_stream = widened(stream16);
  for (const int threads : {1, 2}) {
    INFO(threads << " thread(s)");
    CpuBackend backend(threads, Precision::bf16);
    Tensor kept = Tensor::zeros({kBatch, kSeq, kChannels}, DType::bf16);
    backend.store(kept, stream);
    CHECK(same_bytes(kept, stream16));
    Tensor copy = Tensor::zeros({kBatch, kSeq, kChannels}, DType::f32);
    backend.store(copy, stream);  // in the values' own dtype, a copy
    CHECK(same_bytes(copy, stream));

    // The statistics are those of the f32 stream the forward normalised, as a stage keeps them.
    Tensor out = Tensor::zeros({kBatch, kSeq, kChannels}, DType::f32), mean = Tensor::zeros({kBatch, kSeq}, DType::f32),
           rstd = Tensor::zeros({kBatch, kSeq}, DType::f32);
    backend.layernorm_forward(out, mean, rstd, stream, weight, bias);
    // dinp accumulates: both start from the same gradient.
    Tensor dinp = uniform_f32({kBatch, kSeq, kChannels}, rng),
           dinp16 = Tensor::zeros({kBatch, kSeq, kChannels}, DType::f32);
    std::memcpy(dinp16.data(), dinp.data(), dinp.nbytes());
    Tensor dw = uniform_f32({kChannels}, rng), db = uniform_f32({kChannels}, rng);
    Tensor dw16 = Tensor::zeros({kChannels}, DType::f32), db16 = Tensor::zeros({kChannels}, DType::f32);
    std::memcpy(dw16.data(), dw.data(), dw.nbytes());
    std::memcpy(db16.data(), db.data(), db.nbytes());
    backend.layernorm_backward(dinp, dw, db, dout, widened_stream, weight, mean, rstd);
    backend.layernorm_backward(dinp16, dw16, db16, dout, stream16, weight, mean, rstd);
    CHECK(same_bytes(dinp16, dinp));
    CHECK(same_bytes(dw16, dw));
    CHECK(same_bytes(db16, db));
  }
}

TEST_CASE(
    "a stage under bf16 stores its activations in bf16 and sums the residual stream in f32: the bytes it saves, "
    "as estimated",
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
    // Per block ln1, qkv, atty, ln2, fch, fch_gelu, residual2 and residual3 (a token's 16 kChannels) but the
    // stage's output, and ln_f, at 2 bytes not 4; under a full recompute the kept residual3 stays f32.
    StageFootprint footprint{0, config.n_layer, batch, seq, 1};
    footprint.recompute = recompute;
    const double estimated_full = estimate_training_memory(config, footprint).activation_bytes;
    footprint.stored_activation_bytes = 2;
    const double estimated_stored = estimate_training_memory(config, footprint).activation_bytes;
    CHECK(stored < full);
    CHECK(full - stored == Approx(estimated_full - estimated_stored));
    // Without recomputation: 2 bytes saved on each of 16 kChannels a token in each block, less the output's kChannels,
    // and kChannels for ln_f.
    const double tokens = batch * seq, kChannels = config.n_embd;
    if (recompute == Recompute::none) CHECK(full - stored == 2 * tokens * (config.n_layer * 16 * kChannels));
  }
}

// The figure docs/precision.md gives: `small` at batch 8 x 256, one rank, no recomputation.
TEST_CASE("small under bf16 holds 0.545 of fp32's activation bytes, within the 0.55 bench compute targets",
          "[model][bf16]") {
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
  CHECK(ratio == Approx(0.545).margin(0.002));
  CHECK(ratio <= 0.55);
}

// What storing qkv and fch in bf16 costs the attention and GELU against their f32 inputs (docs/
// precision.md states these bounds), u = 2^-8 a rounding, per output:
//   GELU:      |y - gelu(x)| <= 1.13 u |x| + u |y| + 2^-19 (|x| + |y|)   (GELU's slope is within
//              [-0.17, 1.13]; the output rounded; f32 evaluation)
//   attention: |y - att(q, k, v)| <= ((e^(2 d) - 1)(1 + u) + u) m + u |y| + (kSeq + hs) 2^-22 m, for
//              query row i and channel c, m = max_j |v_jc| over its keys, d = max_j of the score's
//              change bound scale (2u + u^2) sum_c |q_ic||k_jc| (the softmax weights move by at
//              most e^(2d) - 1 of themselves, each v by u of itself).
TEST_CASE("the attention and GELU on bf16-stored inputs stay within the stated bounds of their f32 inputs",
          "[kernels][bf16]") {
  const double u = std::ldexp(1.0, -8);
  std::mt19937 rng(25);
  const Tensor qkv = uniform_f32({kBatch, kSeq, 3 * kChannels}, rng, 2.0f),
               fch = uniform_f32({kBatch, kSeq, kChannels}, rng, 4.0f);
  CpuBackend backend(1, Precision::bf16);
  CpuBackend fp32(1, Precision::fp32);

  Tensor g = Tensor::zeros({kBatch, kSeq, kChannels}, DType::f32),
         g16 = Tensor::zeros({kBatch, kSeq, kChannels}, DType::bf16);
  fp32.gelu_forward(g, fch);
  backend.gelu_forward(g16, rounded(fch));
  const Tensor got_gelu = widened(g16);
  double worst_gelu = 0;
  for (std::int64_t i = 0; i < g.numel(); ++i) {
    const double x = std::abs(fch.data_as<float>()[i]), y = got_gelu.data_as<float>()[i];
    const double error = std::abs(y - g.data_as<float>()[i]);
    REQUIRE(error <= 1.13 * u * x + u * std::abs(y) + std::ldexp(1.0, -19) * (x + std::abs(y)));
    worst_gelu = std::max(worst_gelu, error / (x + 1e-30));
  }
  CHECK(worst_gelu > std::ldexp(1.0, -12));  // the input was rounded: more than f32 could err

  const Shape state = backend.attention_state_shape(kBatch, kHeads, kSeq);
  Tensor y = Tensor::zeros({kBatch, kSeq, kChannels}, DType::f32), att = Tensor::zeros(state, DType::f32);
  Tensor y16 = Tensor::zeros({kBatch, kSeq, kChannels}, DType::bf16), att16 = Tensor::zeros(state, DType::f32);
  fp32.attention_forward(y, att, qkv, kHeads);
  backend.attention_forward(y16, att16, rounded(qkv), kHeads);
  const Tensor got = widened(y16);
  const int hs = kChannels / kHeads;
  const double scale = 1.0 / std::sqrt(double(hs));
  const float* x = qkv.data_as<float>();
  double worst = 0;
  for (int b = 0; b < kBatch; ++b)
    for (int h = 0; h < kHeads; ++h)
      for (int i = 0; i < kSeq; ++i) {
        const float* q = x + (std::int64_t(b) * kSeq + i) * 3 * kChannels + h * hs;
        double d = 0;
        for (int j = 0; j <= i; ++j) {
          const float* k = x + (std::int64_t(b) * kSeq + j) * 3 * kChannels + kChannels + h * hs;
          double magnitude = 0;
          for (int c = 0; c < hs; ++c) magnitude += std::abs(double(q[c]) * k[c]);
          d = std::max(d, scale * (2 * u + u * u) * magnitude);
        }
        for (int c = 0; c < hs; ++c) {
          double m = 0;
          for (int j = 0; j <= i; ++j)
            m = std::max(
                m, double(std::abs(x[(std::int64_t(b) * kSeq + j) * 3 * kChannels + 2 * kChannels + h * hs + c])));
          const std::int64_t at = (std::int64_t(b) * kSeq + i) * kChannels + h * hs + c;
          const double out = got.data_as<float>()[at], error = std::abs(out - y.data_as<float>()[at]);
          const double bound =
              ((std::exp(2 * d) - 1) * (1 + u) + u) * m + u * std::abs(out) + (kSeq + hs) * std::ldexp(1.0, -22) * m;
          INFO("sequence " << b << " head " << h << " row " << i << " channel " << c);
          REQUIRE(error <= bound);
          worst = std::max(worst, error / m);
        }
      }
  CHECK(worst > std::ldexp(1.0, -12));
}
