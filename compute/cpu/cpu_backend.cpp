// Each op reads its shapes off the tensors, checks every relation the kernel relies on (a
// mismatch is an internal bug and throws), and calls the kernel for the tensors' dtype.
// Token and target ids are range-checked here too: the kernels index with them.

#include "compute/cpu/cpu_backend.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>

#include "compute/cpu/kernels.hpp"
#include "compute/cpu/openblas_setup.hpp"

namespace troupe::compute {
namespace {

std::string op_prefix(const char* op) { return std::string(op) + ": "; }

void check_host(const Tensor& t, const char* op) {
  TROUPE_CHECK(t.defined(), op_prefix(op) + "undefined tensor");
  TROUPE_CHECK(t.device() == Device::cpu, op_prefix(op) + t.describe() + " is not on the cpu");
}

// Every tensor defined, on the cpu, and of the first one's dtype, which is f32 or f64.
DType check_real(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor& first = **tensors.begin();
  check_host(first, op);
  TROUPE_CHECK(first.dtype() == DType::f32 || first.dtype() == DType::f64,
               op_prefix(op) + "the cpu backend computes in f32 or f64, got " + first.describe());
  for (const Tensor* t : tensors) {
    check_host(*t, op);
    check_dtype(*t, first.dtype(), op);
  }
  return first.dtype();
}

void check_shape(const Tensor& t, const Shape& shape, const char* op) {
  TROUPE_CHECK(t.shape() == shape, op_prefix(op) + t.describe() + ", expected shape " + shape_string(shape));
}

void check_numel(const Tensor& t, std::int64_t numel, const char* op) {
  TROUPE_CHECK(t.numel() == numel, op_prefix(op) + t.describe() + ", expected " + std::to_string(numel) + " elements");
}

int to_int(std::int64_t value, const char* op) {
  TROUPE_CHECK(value >= 0 && value <= INT_MAX, op_prefix(op) + "extent " + std::to_string(value) + " exceeds int");
  return static_cast<int>(value);
}

// Every id in [0, limit).
void check_ids(const Tensor& ids, std::int64_t limit, const char* op) {
  check_host(ids, op);
  check_dtype(ids, DType::i32, op);
  const std::int32_t* p = ids.data_as<std::int32_t>();
  const auto bad = std::find_if(p, p + ids.numel(), [limit](std::int32_t id) { return id < 0 || id >= limit; });
  TROUPE_CHECK(bad == p + ids.numel(), op_prefix(op) + "id " + std::to_string(*bad) + " at index " +
                                           std::to_string(bad - p) + " is outside [0, " + std::to_string(limit) + ")");
}

struct EncoderDims {
  int B, T, C;
};

// The shapes encoder_forward and encoder_backward share: tokens (B, T) with ids below wte's rows,
// wte (V, C), wpe (maxT, C) with T <= maxT, and act, the activation or its gradient, (B, T, C).
EncoderDims check_encoder_shapes(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& act,
                                 const char* op) {
  TROUPE_CHECK(tokens.rank() == 2 && wte.rank() == 2 && wpe.rank() == 2,
               op_prefix(op) + tokens.describe() + ", " + wte.describe() + ", " + wpe.describe());
  const int B = to_int(tokens.dim(0), op);
  const int T = to_int(tokens.dim(1), op);
  const int C = to_int(wte.dim(1), op);
  check_shape(wpe, {wpe.dim(0), C}, op);
  TROUPE_CHECK(T <= wpe.dim(0), op_prefix(op) + "sequence length " + std::to_string(T) + " exceeds " + wpe.describe());
  check_shape(act, {B, T, C}, op);
  check_ids(tokens, wte.dim(0), op);
  return {B, T, C};
}

struct AttentionDims {
  int B, T, C;
};

// The shapes attention_forward and attention_backward share: qkv (B, T, 3C) with n_head dividing
// C, out (or dout) (B, T, C), att (B, NH, T, T).
AttentionDims check_attention_shapes(const Tensor& qkv, const Tensor& out, const Tensor& att, int n_head,
                                     const char* op) {
  TROUPE_CHECK(qkv.rank() == 3 && qkv.dim(2) % 3 == 0, op_prefix(op) + "qkv " + qkv.describe() + " is not (B, T, 3C)");
  const int B = to_int(qkv.dim(0), op);
  const int T = to_int(qkv.dim(1), op);
  const int C = to_int(qkv.dim(2) / 3, op);
  TROUPE_CHECK(n_head > 0 && C % n_head == 0,
               op_prefix(op) + std::to_string(n_head) + " heads do not divide C = " + std::to_string(C));
  TROUPE_CHECK(T > 0, op_prefix(op) + "empty sequence in qkv " + qkv.describe());
  check_shape(out, {B, T, C}, op);
  check_shape(att, {B, n_head, T, T}, op);
  return {B, T, C};
}

// Calls fn(Real{}) with Real = float or double after dtype.
template <typename Fn>
void with_real(DType dtype, Fn&& fn) {
  if (dtype == DType::f32) {
    fn(float{});
  } else {
    fn(double{});
  }
}

}  // namespace

CpuBackend::CpuBackend(int threads)
    : threads_(threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))) {
  cpu::configure_openblas(threads_);
}

Tensor CpuBackend::zeros(Shape shape, DType dtype) { return Tensor::zeros(std::move(shape), dtype); }

void CpuBackend::fill_zero(Tensor& t) {
  check_host(t, "fill_zero");
  std::memset(t.data(), 0, t.nbytes());
}

void CpuBackend::copy(Tensor& dst, const Tensor& src) {
  check_host(dst, "copy");
  check_host(src, "copy");
  check_dtype(dst, src.dtype(), "copy");
  check_numel(dst, src.numel(), "copy");
  std::memmove(dst.data(), src.data(), src.nbytes());
}

void CpuBackend::encoder_forward(Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe) {
  constexpr const char* op = "encoder_forward";
  const DType dtype = check_real(op, {&out, &wte, &wpe});
  const auto [B, T, C] = check_encoder_shapes(tokens, wte, wpe, out, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::encoder_forward(out.data_as<Real>(), tokens.data_as<std::int32_t>(), wte.data_as<Real>(), wpe.data_as<Real>(),
                         B, T, C);
  });
}

void CpuBackend::encoder_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens) {
  constexpr const char* op = "encoder_backward";
  const DType dtype = check_real(op, {&dout, &dwte, &dwpe});
  const auto [B, T, C] = check_encoder_shapes(tokens, dwte, dwpe, dout, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::encoder_backward(dwte.data_as<Real>(), dwpe.data_as<Real>(), dout.data_as<Real>(),
                          tokens.data_as<std::int32_t>(), B, T, C);
  });
}

void CpuBackend::layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& inp, const Tensor& weight,
                                   const Tensor& bias) {
  constexpr const char* op = "layernorm_forward";
  const DType dtype = check_real(op, {&inp, &out, &mean, &rstd, &weight, &bias});
  const int C = to_int(inp.dim(-1), op);
  const std::int64_t N = inp.numel() / std::max(C, 1);
  check_same_shape(out, inp, op);
  check_numel(mean, N, op);
  check_numel(rstd, N, op);
  check_shape(weight, {C}, op);
  check_shape(bias, {C}, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::layernorm_forward(out.data_as<Real>(), mean.data_as<Real>(), rstd.data_as<Real>(), inp.data_as<Real>(),
                           weight.data_as<Real>(), bias.data_as<Real>(), N, C);
  });
}

void CpuBackend::layernorm_backward(Tensor& dinp, Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                    const Tensor& weight, const Tensor& mean, const Tensor& rstd) {
  constexpr const char* op = "layernorm_backward";
  const DType dtype = check_real(op, {&inp, &dinp, &dweight, &dbias, &dout, &weight, &mean, &rstd});
  const int C = to_int(inp.dim(-1), op);
  const std::int64_t N = inp.numel() / std::max(C, 1);
  check_same_shape(dinp, inp, op);
  check_same_shape(dout, inp, op);
  check_numel(mean, N, op);
  check_numel(rstd, N, op);
  check_shape(weight, {C}, op);
  check_shape(dweight, {C}, op);
  check_shape(dbias, {C}, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::layernorm_backward(dinp.data_as<Real>(), dweight.data_as<Real>(), dbias.data_as<Real>(), dout.data_as<Real>(),
                            inp.data_as<Real>(), weight.data_as<Real>(), mean.data_as<Real>(), rstd.data_as<Real>(), N,
                            C);
  });
}

void CpuBackend::matmul_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias) {
  constexpr const char* op = "matmul_forward";
  const DType dtype =
      bias.defined() ? check_real(op, {&inp, &out, &weight, &bias}) : check_real(op, {&inp, &out, &weight});
  TROUPE_CHECK(weight.rank() == 2, op_prefix(op) + "weight " + weight.describe() + " is not (OC, C)");
  const int OC = to_int(weight.dim(0), op);
  const int C = to_int(weight.dim(1), op);
  TROUPE_CHECK(inp.dim(-1) == C && out.dim(-1) == OC,
               op_prefix(op) + inp.describe() + " · " + weight.describe() + "ᵀ into " + out.describe());
  const int N = to_int(inp.numel() / std::max(C, 1), op);
  check_numel(out, static_cast<std::int64_t>(N) * OC, op);
  if (bias.defined()) check_shape(bias, {OC}, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::matmul_forward(out.data_as<Real>(), inp.data_as<Real>(), weight.data_as<Real>(),
                        bias.defined() ? bias.data_as<Real>() : nullptr, N, C, OC);
  });
}

void CpuBackend::matmul_backward(Tensor& dinp, Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                 const Tensor& weight) {
  constexpr const char* op = "matmul_backward";
  const DType dtype = dbias.defined() ? check_real(op, {&inp, &dinp, &dweight, &dbias, &dout, &weight})
                                      : check_real(op, {&inp, &dinp, &dweight, &dout, &weight});
  TROUPE_CHECK(weight.rank() == 2, op_prefix(op) + "weight " + weight.describe() + " is not (OC, C)");
  const int OC = to_int(weight.dim(0), op);
  const int C = to_int(weight.dim(1), op);
  TROUPE_CHECK(inp.dim(-1) == C && dout.dim(-1) == OC,
               op_prefix(op) + "dout " + dout.describe() + " for " + inp.describe() + " · " + weight.describe() + "ᵀ");
  const int N = to_int(inp.numel() / std::max(C, 1), op);
  check_numel(dout, static_cast<std::int64_t>(N) * OC, op);
  check_same_shape(dinp, inp, op);
  check_same_shape(dweight, weight, op);
  if (dbias.defined()) check_shape(dbias, {OC}, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::matmul_backward(dinp.data_as<Real>(), dweight.data_as<Real>(),
                         dbias.defined() ? dbias.data_as<Real>() : nullptr, dout.data_as<Real>(), inp.data_as<Real>(),
                         weight.data_as<Real>(), N, C, OC);
  });
}

void CpuBackend::attention_forward(Tensor& out, Tensor& att, const Tensor& qkv, int n_head) {
  constexpr const char* op = "attention_forward";
  const DType dtype = check_real(op, {&qkv, &out, &att});
  const auto [B, T, C] = check_attention_shapes(qkv, out, att, n_head, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::attention_forward(out.data_as<Real>(), att.data_as<Real>(), qkv.data_as<Real>(), B, T, C, n_head);
  });
}

void CpuBackend::attention_backward(Tensor& dqkv, Tensor& datt, const Tensor& dout, const Tensor& qkv,
                                    const Tensor& att, int n_head) {
  constexpr const char* op = "attention_backward";
  const DType dtype = check_real(op, {&qkv, &dqkv, &datt, &dout, &att});
  const auto [B, T, C] = check_attention_shapes(qkv, dout, att, n_head, op);
  check_same_shape(dqkv, qkv, op);
  check_same_shape(datt, att, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::attention_backward(dqkv.data_as<Real>(), datt.data_as<Real>(), dout.data_as<Real>(), qkv.data_as<Real>(),
                            att.data_as<Real>(), B, T, C, n_head);
  });
}

void CpuBackend::gelu_forward(Tensor& out, const Tensor& inp) {
  constexpr const char* op = "gelu_forward";
  const DType dtype = check_real(op, {&inp, &out});
  check_same_shape(out, inp, op);
  with_real(dtype,
            [&]<typename Real>(Real) { cpu::gelu_forward(out.data_as<Real>(), inp.data_as<Real>(), inp.numel()); });
}

void CpuBackend::gelu_backward(Tensor& dinp, const Tensor& inp, const Tensor& dout) {
  constexpr const char* op = "gelu_backward";
  const DType dtype = check_real(op, {&inp, &dinp, &dout});
  check_same_shape(dinp, inp, op);
  check_same_shape(dout, inp, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::gelu_backward(dinp.data_as<Real>(), inp.data_as<Real>(), dout.data_as<Real>(), inp.numel());
  });
}

void CpuBackend::residual_forward(Tensor& out, const Tensor& a, const Tensor& b) {
  constexpr const char* op = "residual_forward";
  const DType dtype = check_real(op, {&a, &b, &out});
  check_same_shape(a, b, op);
  check_same_shape(out, a, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::residual_forward(out.data_as<Real>(), a.data_as<Real>(), b.data_as<Real>(), a.numel());
  });
}

void CpuBackend::crossentropy_forward(Tensor& losses, Tensor& probs, const Tensor& logits, const Tensor& targets,
                                      int vocab_size) {
  constexpr const char* op = "crossentropy_forward";
  const DType dtype = check_real(op, {&logits, &probs, &losses});
  const int Vp = to_int(logits.dim(-1), op);
  TROUPE_CHECK(vocab_size > 0 && vocab_size <= Vp,
               op_prefix(op) + "vocab size " + std::to_string(vocab_size) + " for " + logits.describe());
  const std::int64_t N = logits.numel() / Vp;
  check_same_shape(probs, logits, op);
  check_numel(losses, N, op);
  check_numel(targets, N, op);
  check_ids(targets, vocab_size, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::crossentropy_forward(losses.data_as<Real>(), probs.data_as<Real>(), logits.data_as<Real>(),
                              targets.data_as<std::int32_t>(), N, vocab_size, Vp);
  });
}

void CpuBackend::crossentropy_backward(Tensor& dlogits, const Tensor& probs, const Tensor& targets, float dloss) {
  constexpr const char* op = "crossentropy_backward";
  const DType dtype = check_real(op, {&probs, &dlogits});
  const int Vp = to_int(probs.dim(-1), op);
  TROUPE_CHECK(Vp > 0, op_prefix(op) + "probs " + probs.describe() + " has no columns");
  const std::int64_t N = probs.numel() / Vp;
  check_same_shape(dlogits, probs, op);
  check_numel(targets, N, op);
  check_ids(targets, Vp, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::crossentropy_backward(dlogits.data_as<Real>(), probs.data_as<Real>(), targets.data_as<std::int32_t>(),
                               static_cast<Real>(dloss), N, Vp);
  });
}

void CpuBackend::adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWHyper& hyper) {
  constexpr const char* op = "adamw_update";
  const DType dtype = check_real(op, {&param, &grad, &m, &v});
  check_same_shape(grad, param, op);
  check_same_shape(m, param, op);
  check_same_shape(v, param, op);
  TROUPE_CHECK(hyper.step >= 1, op_prefix(op) + "step " + std::to_string(hyper.step) + " is not 1-based");
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::adamw_update(param.data_as<Real>(), grad.data_as<Real>(), m.data_as<Real>(), v.data_as<Real>(), param.numel(),
                      hyper);
  });
}

double CpuBackend::sum_of_squares(const Tensor& t) {
  const DType dtype = check_real("sum_of_squares", {&t});
  double result = 0;
  with_real(dtype, [&]<typename Real>(Real) { result = cpu::sum_of_squares(t.data_as<Real>(), t.numel()); });
  return result;
}

void CpuBackend::scale(Tensor& t, float factor) {
  const DType dtype = check_real("scale", {&t});
  with_real(dtype, [&]<typename Real>(Real) { cpu::scale(t.data_as<Real>(), t.numel(), static_cast<Real>(factor)); });
}

}  // namespace troupe::compute
