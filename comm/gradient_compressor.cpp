#include "comm/gradient_compressor.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "comm/bf16_wire.hpp"
#include "comm/powersgd.hpp"
#include "compute/memory_ledger.hpp"
#include "compute/random.hpp"

namespace troupe::comm {
namespace {

using Clock = std::chrono::steady_clock;

// `count` elements of `dtype` from element `from` of `source` to element `to` of `target`.
void copy_elements(const compute::Tensor& source, std::int64_t from, const compute::Tensor& target, std::int64_t to,
                   std::int64_t count) {
  const std::size_t size = compute::dtype_size(source.dtype());
  std::memcpy(static_cast<char*>(target.data()) + static_cast<std::size_t>(to) * size,
              static_cast<const char*>(source.data()) + static_cast<std::size_t>(from) * size,
              static_cast<std::size_t>(count) * size);
}

// Calls `work.template operator()<T>()` with T the tensor's element type, f32 or f64.
template <class Work>
void by_type(compute::DType dtype, Work&& work) {
  TROUPE_CHECK(dtype == compute::DType::f32 || dtype == compute::DType::f64,
               "PowerSGD compresses f32 or f64 gradients");
  if (dtype == compute::DType::f32) {
    work.template operator()<float>();
  } else {
    work.template operator()<double>();
  }
}

}  // namespace

GradientCompressor::GradientCompressor(CompressionOptions options, std::vector<GradientTensor> tensors, int group_size,
                                       SumChannel channel, compute::DType dtype)
    : options_(options), tensors_(std::move(tensors)), group_size_(group_size), channel_(std::move(channel)) {
  TROUPE_CHECK(group_size_ >= 1 && options_.rank >= 1, "a compressor needs a group and a positive rank");
  std::sort(tensors_.begin(), tensors_.end(),
            [](const GradientTensor& a, const GradientTensor& b) { return a.offset < b.offset; });
  if (options_.kind != Compression::powersgd) return;
  std::int64_t total = 0;
  for (const GradientTensor& t : tensors_) total = std::max(total, t.offset + t.rows * t.cols);
  // Kept between steps like AdamW's moments, and counted with them.
  compute::MemoryScope scope(compute::MemoryKind::optimizer_state);
  residuals_ = compute::Tensor::zeros({total}, dtype);
  factors_ = compute::Tensor::zeros({total}, dtype);
  // Q's first values, the same on every rank: a pure function of (seed, global offset, index).
  by_type(dtype, [&]<typename T>() {
    for (const GradientTensor& t : tensors_) {
      if (!powersgd::worth_compressing(t.rows, t.cols, options_.rank)) continue;
      T* q = factors_.data_as<T>() + t.offset;
      for (std::int64_t i = 0; i < t.cols * options_.rank; ++i)
        q[i] = static_cast<T>(compute::counter_normal(options_.seed,
                                                      static_cast<std::uint64_t>(t.global_offset.value_or(t.offset)),
                                                      static_cast<std::uint64_t>(i)));
    }
  });
}

SumChannel::Ticket GradientCompressor::send(const compute::Tensor& wire, std::size_t plain_bytes) {
  totals_.wire_bytes.fetch_add(wire.nbytes(), std::memory_order_relaxed);
  totals_.plain_bytes.fetch_add(plain_bytes, std::memory_order_relaxed);
  return channel_.start(wire);
}

void GradientCompressor::count_time(Clock::time_point since) {
  const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since);
  totals_.nanoseconds.fetch_add(static_cast<std::uint64_t>(elapsed.count()), std::memory_order_relaxed);
}

GradientCompressor::Matrix GradientCompressor::matrix(const GradientTensor& tensor) const {
  return {&tensor, residuals_.slice(tensor.offset, {tensor.rows * tensor.cols}),
          factors_.slice(tensor.offset, {tensor.cols * options_.rank})};
}

void GradientCompressor::start(compute::Tensor bucket, std::int64_t offset) {
  Pending pending;
  pending.bucket = bucket;
  pending.offset = offset;
  if (!compressing()) {
    pending.wire = bucket;
    pending.first = send(bucket, bucket.nbytes());
  } else if (options_.kind == Compression::bf16) {
    TROUPE_CHECK(bucket.dtype() == compute::DType::f32, "bf16 compression takes f32 gradients");
    const Clock::time_point began = Clock::now();
    compute::MemoryScope scope(compute::MemoryKind::comm_buffers);  // freed when the step's sums end
    pending.wire = compute::Tensor::zeros({bucket.numel()}, compute::DType::bf16);
    encode_bf16(bucket.data_as<float>(), pending.wire.data_as<std::uint16_t>(),
                static_cast<std::size_t>(bucket.numel()));
    count_time(began);
    pending.first = send(pending.wire, bucket.nbytes());
  } else {
    start_powersgd(pending);
  }
  pending_.push_back(std::move(pending));
}

void GradientCompressor::start_powersgd(Pending& pending) {
  const Clock::time_point began = Clock::now();
  const compute::Tensor& bucket = pending.bucket;
  const std::int64_t offset = pending.offset;
  const std::int64_t end = offset + bucket.numel();
  const int r = options_.rank;
  // The bucket's compressed matrices, and the ranges between them that go plain.
  std::int64_t plain_from = 0, p_count = 0;
  for (const GradientTensor& tensor : tensors_) {
    const std::int64_t numel = tensor.rows * tensor.cols;
    if (tensor.offset < offset || tensor.offset + numel > end) continue;
    if (!powersgd::worth_compressing(tensor.rows, tensor.cols, r)) continue;
    const std::int64_t begin = tensor.offset - offset;
    if (begin > plain_from) pending.plain.emplace_back(plain_from, begin);
    plain_from = begin + numel;
    pending.matrices.push_back(matrix(tensor));
    p_count += tensor.rows * r;
  }
  if (bucket.numel() > plain_from) pending.plain.emplace_back(plain_from, bucket.numel());
  for (const auto& [from, to] : pending.plain) pending.plain_count += to - from;

  // wire = [plain elements | P of each matrix]; M = gradient + residual, kept in the bucket.
  compute::MemoryScope scope(compute::MemoryKind::comm_buffers);  // freed when the step's sums end
  pending.wire = compute::Tensor::zeros({pending.plain_count + p_count}, bucket.dtype());
  std::int64_t at = 0;
  for (const auto& [from, to] : pending.plain) {
    copy_elements(bucket, from, pending.wire, at, to - from);
    at += to - from;
  }
  by_type(bucket.dtype(), [&]<typename T>() {
    for (const Matrix& m : pending.matrices) {
      const GradientTensor& t = *m.tensor;
      T* grad = bucket.data_as<T>() + (t.offset - offset);
      const T* residual = m.residual.data_as<T>();
      for (std::int64_t i = 0; i < t.rows * t.cols; ++i) grad[i] += residual[i];
      powersgd::multiply(grad, m.q.data_as<T>(), pending.wire.data_as<T>() + at, t.rows, t.cols, r);
      at += t.rows * r;
    }
  });
  count_time(began);
  pending.first = send(pending.wire, bucket.nbytes());
}

void GradientCompressor::send_q(Pending& pending) {
  const Clock::time_point began = Clock::now();
  const compute::Tensor& bucket = pending.bucket;
  std::int64_t at = 0;
  for (const auto& [from, to] : pending.plain) {
    copy_elements(pending.wire, at, bucket, from, to - from);
    at += to - from;
  }
  if (pending.matrices.empty()) return;
  const int r = options_.rank;
  std::int64_t q_count = 0;
  for (const Matrix& m : pending.matrices) q_count += m.tensor->cols * r;
  compute::MemoryScope scope(compute::MemoryKind::comm_buffers);  // freed when the step's sums end
  pending.q_wire = compute::Tensor::zeros({q_count}, bucket.dtype());
  by_type(bucket.dtype(), [&]<typename T>() {
    T* p = pending.wire.data_as<T>() + pending.plain_count;
    T* q = pending.q_wire.data_as<T>();
    for (const Matrix& m : pending.matrices) {
      const GradientTensor& t = *m.tensor;
      powersgd::orthonormalise(p, t.rows, r);
      const T* grad = bucket.data_as<T>() + (t.offset - pending.offset);
      powersgd::multiply_transposed(grad, p, q, t.rows, t.cols, r);
      p += t.rows * r;
      q += t.cols * r;
    }
  });
  count_time(began);
  pending.second = send(pending.q_wire, 0);
}

void GradientCompressor::rebuild(Pending& pending) {
  const Clock::time_point began = Clock::now();
  const int r = options_.rank;
  by_type(pending.bucket.dtype(), [&]<typename T>() {
    const T* p = pending.wire.data_as<T>() + pending.plain_count;
    const T* q = pending.q_wire.data_as<T>();
    const T n = static_cast<T>(group_size_);
    for (const Matrix& m : pending.matrices) {
      const GradientTensor& t = *m.tensor;
      T* grad = pending.bucket.data_as<T>() + (t.offset - pending.offset);
      T* residual = m.residual.data_as<T>();
      // grad holds M here; the residual becomes M − P·Qᵀ/n and grad the approximation P·Qᵀ.
      std::copy(grad, grad + t.rows * t.cols, residual);
      powersgd::reconstruct(p, q, grad, t.rows, t.cols, r);
      for (std::int64_t i = 0; i < t.rows * t.cols; ++i) residual[i] -= grad[i] / n;
      std::copy(q, q + t.cols * r, m.q.data_as<T>());
      p += t.rows * r;
      q += t.cols * r;
    }
  });
  count_time(began);
}

void GradientCompressor::finish() {
  // Taken out first: a failed sum leaves no bucket behind for the next step.
  std::vector<Pending> pending = std::move(pending_);
  pending_.clear();
  // Every wait comes before any state changes, so a sum that fails (a lost peer) leaves the
  // residuals and Q as the last completed step left them, as a rescue snapshot expects.
  for (Pending& bucket : pending) {
    channel_.wait(bucket.first);
    if (bucket.wire.dtype() == compute::DType::bf16) {
      const Clock::time_point began = Clock::now();
      decode_bf16(bucket.wire.data_as<std::uint16_t>(), bucket.bucket.data_as<float>(),
                  static_cast<std::size_t>(bucket.bucket.numel()));
      count_time(began);
    } else if (bucket.wire.data() != bucket.bucket.data()) {
      send_q(bucket);
    }
  }
  for (Pending& bucket : pending) {
    if (!bucket.matrices.empty()) channel_.wait(bucket.second);
  }
  for (Pending& bucket : pending) {
    if (!bucket.matrices.empty()) rebuild(bucket);
  }
}

}  // namespace troupe::comm
