#pragma once
// One NCCL communicator per process group of the dp × pp × tp grid, on the current CUDA device.
//
// Bootstrap: rank 0 of the group calls make_id() and sends the id's 128 bytes to the others over
// the control plane; every rank then calls create() with it. Nothing here knows how the bytes
// travel (comm/ knows nothing of actors).
//
// Ordering: every collective and transfer is enqueued on the communicator's own stream after an
// event recorded on the compute stream at the call, so it sees everything compute enqueued
// before it and overlaps with whatever compute enqueues after (data-parallel gradient buckets
// during backward). compute_waits() orders later compute after the communication, without a
// host sync.
//
// Failure: the communicator is non-blocking (ncclConfig_t::blocking = 0), so no call can hang
// the host. wait(timeout) polls NCCL's asynchronous error while the stream drains; an error
// or the timeout (a lost peer) aborts the communicator with ncclCommAbort and returns an Error
// naming the group rank and the cause, so the caller's supervisor can treat a lost GPU peer
// as a recoverable failure. After an abort every call returns an Error. Destroying a
// communicator whose work has not finished aborts it rather than wait for a peer that may be gone.

#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "compute/expected.hpp"

struct ncclComm;

namespace troupe::comm {

// ncclUniqueId as plain bytes: what the control-plane message carries.
using NcclId = std::array<char, 128>;

class NcclComm {
 public:
  // Called once per group, on its rank 0; an Error when NCCL cannot start (no device, no network).
  static Expected<NcclId> make_id();
  // Joins the group: all `size` ranks call it with the same id. Waits at most `timeout` for the
  // others; compute is the stream collectives are ordered after.
  static Expected<std::unique_ptr<NcclComm>> create(const NcclId& id, int size, int rank, cudaStream_t compute,
                                                    std::chrono::milliseconds timeout);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  cudaStream_t stream() const { return stream_; }

  // fp32 sums (gradients are fp32 in both precisions of the CUDA backend).
  Status all_reduce_sum(float* data, std::size_t count);                          // in place
  Status reduce_scatter_sum(float* out, const float* in, std::size_t out_count);  // in: size() · out_count
  Status all_gather(float* out, const float* in, std::size_t in_count);           // out: size() · in_count
  // A pipeline stage's transfers: send to one peer and receive from another in one NCCL group (so
  // neighbours that both send first cannot deadlock); a peer of -1 skips that half.
  Status exchange(const float* send, std::size_t send_count, int send_peer, float* recv, std::size_t recv_count,
                  int recv_peer);

  Status compute_waits();  // the compute stream waits for the communication enqueued so far
  // Whether the communication enqueued so far has finished, without waiting; an Error (after an
  // abort) when NCCL reports one. For a caller that must keep answering while it waits.
  Expected<bool> finished();
  Status wait(std::chrono::milliseconds timeout);  // the host waits; aborts on error or timeout
  void abort();                                    // ncclCommAbort; idempotent
  bool aborted() const { return comm_ == nullptr; }

 private:
  NcclComm(ncclComm* comm, int size, int rank, cudaStream_t compute, cudaStream_t stream, cudaEvent_t compute_done,
           cudaEvent_t comm_done);
  Status after_compute(const char* what);  // comm stream waits for compute so far
  Status settle(int result, const char* what);  // a non-blocking call's outcome; aborts on error
  Error failed(const char* what, const std::string& cause);

  ncclComm* comm_;
  int size_, rank_;
  cudaStream_t compute_, stream_;
  cudaEvent_t compute_done_, comm_done_;
};

}  // namespace troupe::comm
