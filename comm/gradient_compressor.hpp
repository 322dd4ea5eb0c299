#pragma once
// Gradient compression per bucket, on a data-parallel group (docs/comm.md, "Gradient
// compression"). The caller starts buckets (slices of the flat gradient buffer) while backward
// runs and finishes them all before the optimizer step; afterwards every bucket holds the sum
// over the group, exactly as a plain all-reduce leaves it, or the compressed approximation of
// that sum. How sums travel is the caller's (SumChannel): collectives posted by a worker actor,
// or a Communicator in the tests; every rank must start the same buckets in the same order.
//
//   none, or a step before options.start_step: each bucket summed in place.
//   bf16: each bucket rounded to bf16, summed as bf16 (f32 adds at every hop), read back.
//   powersgd: in each bucket, every matrix that lies wholly inside it and is worth it
//     (powersgd::worth_compressing) is sent as P and Q (powersgd.hpp), the bucket's other
//     elements plain alongside P; two sums per bucket. Starting a bucket adds its residuals
//     and computes P at once; finish() takes the buckets in order, orthonormalising P and
//     computing and posting Q for each while earlier buckets' Q travel, and once every sum is in
//     rebuilds the gradients and updates the state (so a failed sum leaves the state as it was).
//
// Training state (PowerSGD): every rank's residuals, and Q (the same on every rank), each in one
// flat buffer in the gradients' order: a matrix's residual at its own elements, its Q (cols × r,
// fewer elements than the matrix wherever it is compressed) at the start of them; zero
// elsewhere. Q starts as normal values drawn from (seed, the matrix's global offset); the
// residuals at zero.
// Checkpoints and rescue snapshots carry both buffers (residuals() and factors()).
// Used from one thread at a time.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "comm/compression.hpp"
#include "compute/expected.hpp"
#include "compute/tensor.hpp"

namespace troupe::comm {

// A gradient tensor's place in the flat buffer: `rows` × `cols` elements from `offset` (a vector
// is rows × 1). `global_offset` is where its first element sits in the whole model's parameter
// order (unset: `offset`, the buffer is the whole model): Q's first values are drawn from it, so
// two copies of one matrix (a tied embedding on two pipeline stages, a parameter every tensor
// shard holds) start, and stay, equal, and a matrix's start does not depend on the grid.
struct GradientTensor {
  std::int64_t offset = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 1;
  std::optional<std::int64_t> global_offset;
};

struct SumChannel {
  using Ticket = std::uint64_t;
  std::function<Ticket(compute::Tensor)> start;  // sums the tensor over the group, in place
  std::function<void(Ticket)> wait;              // returns once that sum is done; throws on failure
};

// What compression did, for the metrics: bytes the sums carried and the bytes the same buckets
// would have carried as they are, and the seconds spent encoding, factorising and decoding.
// Written by the compressor's thread, read by any.
struct CompressionTotals {
  std::atomic<std::uint64_t> wire_bytes{0};
  std::atomic<std::uint64_t> plain_bytes{0};
  std::atomic<std::uint64_t> nanoseconds{0};
};

class GradientCompressor {
 public:
  // `tensors` describe the flat buffer (gaps between them are summed plain); `group_size` is n;
  // `dtype` is the gradients' (f32, or f64 for PowerSGD).
  GradientCompressor(CompressionOptions options, std::vector<GradientTensor> tensors, int group_size,
                     SumChannel channel, compute::DType dtype = compute::DType::f32);

  const CompressionOptions& options() const { return options_; }
  // The step whose buckets come next (0-based): compression applies from options.start_step on.
  void begin_step(long step) { step_ = step; }
  bool compressing() const { return options_.kind != Compression::none && step_ >= options_.start_step; }
  // `bucket` is elements [offset, offset + numel) of the flat gradient buffer, of the dtype given;
  // it must stay alive until finish().
  void start(compute::Tensor bucket, std::int64_t offset);
  void finish();
  // Forgets the buckets started in a step given up part-way (an in-place recovery renewed the group
  // under them): their sums are never waited for, and the state stays as the last finish() left it.
  void abandon_step() { pending_.clear(); }

  const CompressionTotals& totals() const { return totals_; }
  // PowerSGD's state buffers (shared with the compressor); undefined for other kinds.
  const compute::Tensor& residuals() const { return residuals_; }
  const compute::Tensor& factors() const { return factors_; }

 private:
  // A compressed matrix: its tensor, and its slices of the state buffers.
  struct Matrix {
    const GradientTensor* tensor = nullptr;
    compute::Tensor residual, q;
  };
  struct Pending {
    compute::Tensor bucket;
    std::int64_t offset = 0;  // of the bucket in the flat buffer
    compute::Tensor wire;     // what travels: the bucket itself, its bf16 copy, or [plain | P...]
    SumChannel::Ticket first = 0;
    std::vector<Matrix> matrices;                              // compressed, in bucket order
    std::vector<std::pair<std::int64_t, std::int64_t>> plain;  // [begin, end) in the bucket
    std::int64_t plain_count = 0;
    compute::Tensor q_wire;  // [Q...]
    SumChannel::Ticket second = 0;
  };

  void start_powersgd(Pending& pending);
  void send_q(Pending& pending);
  void rebuild(Pending& pending);
  Matrix matrix(const GradientTensor& tensor) const;
  SumChannel::Ticket send(const compute::Tensor& wire, std::size_t plain_bytes);
  void count_time(std::chrono::steady_clock::time_point since);

  CompressionOptions options_;
  std::vector<GradientTensor> tensors_;  // by offset
  int group_size_;
  SumChannel channel_;
  long step_ = 0;
  compute::Tensor residuals_, factors_;
  std::vector<Pending> pending_;
  CompressionTotals totals_;
};

}  // namespace troupe::comm
