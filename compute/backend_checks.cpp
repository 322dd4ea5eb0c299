#include "compute/backend_checks.hpp"

#include <algorithm>
#include <climits>
#include <numeric>
#include <vector>

namespace troupe::compute::checks {

namespace {

std::string describe_segment(std::span<const AdamWSegment> segments, std::size_t i) {
  const AdamWSegment& s = segments[i];
  return "segment " + std::to_string(i) + " (" + std::to_string(s.count) + " elements at param offset " +
         std::to_string(s.param_offset) + ", moment offset " + std::to_string(s.moment_offset) + ")";
}

// [offset, offset + count) within [0, size), tested without overflowing.
bool within(std::int64_t offset, std::int64_t count, std::int64_t size) {
  return offset >= 0 && offset <= size && count <= size - offset;
}

// No two segments' ranges [offset_of(segment), + count) overlap. Sorted by start, the first
// overlap is always between neighbours, since the ranges before it are disjoint and ordered.
template <typename OffsetOf>
void disjoint(std::span<const AdamWSegment> segments, OffsetOf offset_of, const char* buffers, const char* op) {
  std::vector<std::size_t> order(segments.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return offset_of(segments[a]) < offset_of(segments[b]); });
  for (std::size_t k = 1; k < order.size(); ++k) {
    const AdamWSegment& before = segments[order[k - 1]];
    TROUPE_CHECK(offset_of(before) + before.count <= offset_of(segments[order[k]]),
                 op_prefix(op) + describe_segment(segments, order[k - 1]) + " and " +
                     describe_segment(segments, order[k]) + " overlap in " + buffers);
  }
}

}  // namespace

std::string op_prefix(const char* op) { return std::string(op) + ": "; }

void on_device(const Tensor& t, Device device, const char* op) {
  TROUPE_CHECK(t.defined(), op_prefix(op) + "undefined tensor");
  TROUPE_CHECK(t.device() == device,
               op_prefix(op) + t.describe() + " is not on the " + std::string(device_name(device)));
}

DType same_device_and_dtype(Device device, const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor& first = **tensors.begin();
  on_device(first, device, op);
  for (const Tensor* t : tensors) {
    on_device(*t, device, op);
    check_dtype(*t, first.dtype(), op);
  }
  return first.dtype();
}

void shape(const Tensor& t, const Shape& expected, const char* op) {
  TROUPE_CHECK(t.shape() == expected, op_prefix(op) + t.describe() + ", expected shape " + shape_string(expected));
}

void numel(const Tensor& t, std::int64_t expected, const char* op) {
  TROUPE_CHECK(t.numel() == expected,
               op_prefix(op) + t.describe() + ", expected " + std::to_string(expected) + " elements");
}

int to_int(std::int64_t value, const char* op) {
  TROUPE_CHECK(value >= 0 && value <= INT_MAX, op_prefix(op) + "extent " + std::to_string(value) + " exceeds int");
  return static_cast<int>(value);
}

EncoderDims encoder(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& act, const char* op) {
  TROUPE_CHECK(tokens.rank() == 2 && wte.rank() == 2 && wpe.rank() == 2,
               op_prefix(op) + tokens.describe() + ", " + wte.describe() + ", " + wpe.describe());
  check_dtype(tokens, DType::i32, op);
  const int B = to_int(tokens.dim(0), op);
  const int T = to_int(tokens.dim(1), op);
  const int C = to_int(wte.dim(1), op);
  shape(wpe, {wpe.dim(0), C}, op);
  TROUPE_CHECK(T <= wpe.dim(0), op_prefix(op) + "sequence length " + std::to_string(T) + " exceeds " + wpe.describe());
  shape(act, {B, T, C}, op);
  return {B, T, C};
}

AttentionDims attention(const Tensor& qkv, const Tensor& out, int n_head, const char* op) {
  TROUPE_CHECK(qkv.rank() == 3 && qkv.dim(2) % 3 == 0, op_prefix(op) + "qkv " + qkv.describe() + " is not (B, T, 3C)");
  const int B = to_int(qkv.dim(0), op);
  const int T = to_int(qkv.dim(1), op);
  const int C = to_int(qkv.dim(2) / 3, op);
  TROUPE_CHECK(n_head > 0 && C % n_head == 0,
               op_prefix(op) + std::to_string(n_head) + " heads do not divide C = " + std::to_string(C));
  TROUPE_CHECK(T > 0, op_prefix(op) + "empty sequence in qkv " + qkv.describe());
  shape(out, {B, T, C}, op);
  return {B, T, C};
}

LayerNormDims layernorm(const Tensor& inp, std::initializer_list<const Tensor*> same,
                        std::initializer_list<const Tensor*> per_row, std::initializer_list<const Tensor*> per_column,
                        const char* op) {
  const int C = to_int(inp.dim(-1), op);
  const std::int64_t N = inp.numel() / std::max(C, 1);
  for (const Tensor* t : same) check_same_shape(*t, inp, op);
  for (const Tensor* t : per_row) numel(*t, N, op);
  for (const Tensor* t : per_column) shape(*t, {C}, op);
  return {N, C};
}

MatmulDims matmul(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias, const char* op) {
  TROUPE_CHECK(weight.rank() == 2, op_prefix(op) + "weight " + weight.describe() + " is not (OC, C)");
  const int OC = to_int(weight.dim(0), op);
  const int C = to_int(weight.dim(1), op);
  TROUPE_CHECK(inp.dim(-1) == C && out.dim(-1) == OC,
               op_prefix(op) + inp.describe() + " · " + weight.describe() + "ᵀ with " + out.describe());
  const int N = to_int(inp.numel() / std::max(C, 1), op);
  numel(out, static_cast<std::int64_t>(N) * OC, op);
  if (bias.defined()) shape(bias, {OC}, op);
  return {N, C, OC};
}

GroupedMatmulDims grouped_matmul(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                 std::span<const std::int64_t> rows_of, const char* op) {
  TROUPE_CHECK(weight.rank() == 3, op_prefix(op) + "weight " + weight.describe() + " is not (E, OC, C)");
  const int E = to_int(weight.dim(0), op);
  const int OC = to_int(weight.dim(1), op);
  const int C = to_int(weight.dim(2), op);
  TROUPE_CHECK(std::ssize(rows_of) == E, op_prefix(op) + std::to_string(rows_of.size()) + " row counts for " +
                                             std::to_string(E) + " experts of " + weight.describe());
  std::int64_t rows = 0;
  for (std::int64_t r : rows_of) {
    TROUPE_CHECK(r >= 0, op_prefix(op) + "an expert's row count is negative: " + std::to_string(r));
    rows += r;
  }
  TROUPE_CHECK(inp.dim(-1) == C && out.dim(-1) == OC,
               op_prefix(op) + inp.describe() + " · " + weight.describe() + "ᵀ with " + out.describe());
  numel(inp, rows * C, op);
  numel(out, rows * OC, op);
  if (bias.defined()) shape(bias, {E, OC}, op);
  return {E, to_int(rows, op), C, OC};
}

ColumnSumDims column_sums(const Tensor& dbias, const Tensor& dout, const char* op) {
  TROUPE_CHECK(dout.rank() >= 1, op_prefix(op) + "dout " + dout.describe() + " has no columns");
  const int width = to_int(dout.dim(-1), op);
  shape(dbias, {width}, op);
  return {to_int(dout.numel() / std::max(width, 1), op), width};
}

CrossEntropyDims crossentropy_forward(const Tensor& losses, const Tensor& probs, const Tensor& logits, int vocab_size,
                                      const char* op) {
  const int Vp = to_int(logits.dim(-1), op);
  TROUPE_CHECK(vocab_size > 0 && vocab_size <= Vp,
               op_prefix(op) + "vocab size " + std::to_string(vocab_size) + " for " + logits.describe());
  const std::int64_t N = logits.numel() / Vp;
  check_same_shape(probs, logits, op);
  numel(losses, N, op);
  return {N, Vp};
}

CrossEntropyDims crossentropy_backward(const Tensor& dlogits, const Tensor& probs, const char* op) {
  const int Vp = to_int(probs.dim(-1), op);
  TROUPE_CHECK(Vp > 0, op_prefix(op) + "probs " + probs.describe() + " has no columns");
  check_same_shape(dlogits, probs, op);
  return {probs.numel() / Vp, Vp};
}

void adamw(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
           std::span<const AdamWSegment> segments, const AdamWHyper& hyper, const char* op) {
  TROUPE_CHECK(hyper.step >= 1, op_prefix(op) + "step " + std::to_string(hyper.step) + " is not 1-based");
  check_same_shape(grads, params, op);
  check_same_shape(v, m, op);
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const AdamWSegment& s = segments[i];
    TROUPE_CHECK(s.count > 0, op_prefix(op) + describe_segment(segments, i) + " needs a positive count");
    TROUPE_CHECK(within(s.param_offset, s.count, params.numel()),
                 op_prefix(op) + describe_segment(segments, i) + " reaches outside params " + params.describe());
    TROUPE_CHECK(within(s.moment_offset, s.count, m.numel()),
                 op_prefix(op) + describe_segment(segments, i) + " reaches outside the moments " + m.describe());
  }
  const auto param_offset = [](const AdamWSegment& s) { return s.param_offset; };
  const auto moment_offset = [](const AdamWSegment& s) { return s.moment_offset; };
  disjoint(segments, param_offset, "params", op);
  disjoint(segments, moment_offset, "the moments", op);
}

}  // namespace troupe::compute::checks
