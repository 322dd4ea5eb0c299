#pragma once
// The shape and dtype checks every backend runs before a kernel: a mismatch is an internal bug
// and throws (TROUPE_CHECK) with the op's name and the tensors. Shared so the CPU and the CUDA
// backend agree on what each op accepts; each adds what only it checks (dtypes it computes in,
// ids it can read on the host).

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "compute/adamw_step.hpp"
#include "compute/tensor.hpp"

namespace troupe::compute::checks {

std::string op_prefix(const char* op);

// Every tensor defined, on `device` and of the first one's dtype, which is returned.
DType same_device_and_dtype(Device device, const char* op, std::initializer_list<const Tensor*> tensors);
void on_device(const Tensor& t, Device device, const char* op);
void shape(const Tensor& t, const Shape& expected, const char* op);
void numel(const Tensor& t, std::int64_t expected, const char* op);
int to_int(std::int64_t value, const char* op);

struct EncoderDims {
  int B, T, C;
};
// tokens (B, T) i32, wte (V, C), wpe (maxT, C) with T <= maxT, act (the activation or its
// gradient) (B, T, C). Ids are not read here.
EncoderDims encoder(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& act, const char* op);

struct AttentionDims {
  int B, T, C;
};
// qkv (B, T, 3C) with n_head dividing C and T > 0, out (or dout) (B, T, C). The backend checks
// att against its own attention_state_shape.
AttentionDims attention(const Tensor& qkv, const Tensor& out, int n_head, const char* op);

struct LayerNormDims {
  std::int64_t N;
  int C;
};
// inp (…, C) with N rows, `same` tensors shaped as inp, `per_row` of N elements, `per_column` (C).
LayerNormDims layernorm(const Tensor& inp, std::initializer_list<const Tensor*> same,
                        std::initializer_list<const Tensor*> per_row, std::initializer_list<const Tensor*> per_column,
                        const char* op);

struct MatmulDims {
  int N, C, OC;
};
// weight (OC, C), inp (…, C) with N rows, out (N·OC elements, last axis OC); bias (OC) if defined.
MatmulDims matmul(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias, const char* op);

struct GroupedMatmulDims {
  int E, N, C, OC;
};
// weight (E, OC, C) and rows_of E non-negative counts, inp (…, C) with N = their sum rows, out
// (N·OC elements, last axis OC); bias (E, OC) if defined.
GroupedMatmulDims grouped_matmul(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                 std::span<const std::int64_t> rows_of, const char* op);

struct ColumnSumDims {
  int N, width;
};
// dout (…, width) with N rows, dbias (width).
ColumnSumDims column_sums(const Tensor& dbias, const Tensor& dout, const char* op);

struct CrossEntropyDims {
  std::int64_t N;
  int Vp;
};
// logits (…, Vp) with N rows and 0 < vocab_size <= Vp, probs shaped as logits, losses of N
// elements. Targets are the backend's to check (it knows where it can read their ids).
CrossEntropyDims crossentropy_forward(const Tensor& losses, const Tensor& probs, const Tensor& logits, int vocab_size,
                                      const char* op);
// probs (…, Vp) with N rows and Vp > 0, dlogits shaped as probs.
CrossEntropyDims crossentropy_backward(const Tensor& dlogits, const Tensor& probs, const char* op);

// params and grads shaped alike, m and v shaped alike, hyper.step 1-based; every segment has a
// positive count and lies inside params (from param_offset) and inside m (from moment_offset);
// no two segments overlap in either, so no element is updated twice (a device backend updates
// segments in parallel).
void adamw(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
           std::span<const AdamWSegment> segments, const AdamWHyper& hyper, const char* op);

}  // namespace troupe::compute::checks
