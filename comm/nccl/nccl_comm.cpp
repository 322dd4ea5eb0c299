#include "comm/nccl/nccl_comm.hpp"

#include <nccl.h>

#include <cstring>
#include <thread>

namespace troupe::comm {
namespace {

using Clock = std::chrono::steady_clock;

std::string cuda_error(cudaError_t status) { return cudaGetErrorString(status); }

}  // namespace

Expected<NcclId> NcclComm::make_id() {
  ncclUniqueId id;
  if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
    return Error{std::string("nccl: ncclGetUniqueId: ") + ncclGetErrorString(r)};
  NcclId bytes;
  static_assert(sizeof(id.internal) == std::tuple_size_v<NcclId>);
  std::memcpy(bytes.data(), id.internal, bytes.size());
  return bytes;
}

Expected<std::unique_ptr<NcclComm>> NcclComm::create(const NcclId& id, int size, int rank, cudaStream_t compute,
                                                     std::chrono::milliseconds timeout) {
  const std::string where = "nccl rank " + std::to_string(rank) + " of " + std::to_string(size);
  if (size < 1 || rank < 0 || rank >= size) return Error{where + ": no such rank"};
  ncclUniqueId unique;
  std::memcpy(unique.internal, id.data(), id.size());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, size, unique, rank, &config);
  const auto deadline = Clock::now() + timeout;
  while (r == ncclInProgress) {
    if (Clock::now() > deadline) {
      ncclCommAbort(comm);
      return Error{where + ": the group did not assemble within " + std::to_string(timeout.count()) + " ms"};
    }
    std::this_thread::yield();
    ncclCommGetAsyncError(comm, &r);
  }
  if (r != ncclSuccess) {
    if (comm != nullptr) ncclCommAbort(comm);
    return Error{where + ": ncclCommInitRankConfig: " + ncclGetErrorString(r)};
  }
  cudaStream_t stream = nullptr;
  cudaEvent_t compute_done = nullptr, comm_done = nullptr;
  cudaError_t status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (status == cudaSuccess) status = cudaEventCreateWithFlags(&compute_done, cudaEventDisableTiming);
  if (status == cudaSuccess) status = cudaEventCreateWithFlags(&comm_done, cudaEventDisableTiming);
  if (status != cudaSuccess) {
    ncclCommAbort(comm);
    return Error{where + ": " + cuda_error(status)};
  }
  return std::unique_ptr<NcclComm>(new NcclComm(comm, size, rank, compute, stream, compute_done, comm_done));
}

NcclComm::NcclComm(ncclComm* comm, int size, int rank, cudaStream_t compute, cudaStream_t stream,
                   cudaEvent_t compute_done, cudaEvent_t comm_done)
    : comm_(comm), size_(size), rank_(rank), compute_(compute), stream_(stream), compute_done_(compute_done),
      comm_done_(comm_done) {}

NcclComm::~NcclComm() {
  if (comm_ != nullptr && cudaStreamQuery(stream_) != cudaSuccess) abort();
  if (comm_ != nullptr) {
    ncclCommFinalize(comm_);
    ncclResult_t r = ncclInProgress;
    while (r == ncclInProgress) ncclCommGetAsyncError(comm_, &r);
    if (r == ncclSuccess)
      ncclCommDestroy(comm_);
    else
      ncclCommAbort(comm_);
  }
  cudaEventDestroy(comm_done_);
  cudaEventDestroy(compute_done_);
  cudaStreamDestroy(stream_);
}

Error NcclComm::failed(const char* what, const std::string& cause) {
  return Error{"nccl rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " + what + ": " + cause};
}

void NcclComm::abort() {
  if (comm_ == nullptr) return;
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

Status NcclComm::settle(int result, const char* what) {
  auto r = static_cast<ncclResult_t>(result);
  while (r == ncclInProgress) ncclCommGetAsyncError(comm_, &r);  // enqueueing, not the transfer: short
  if (r == ncclSuccess) return Status::success();
  const std::string cause = std::string(ncclGetErrorString(r)) + " (" + ncclGetLastError(comm_) + ")";
  abort();
  return failed(what, cause);
}

Status NcclComm::after_compute(const char* what) {
  if (aborted()) return failed(what, "the communicator was aborted");
  cudaError_t status = cudaEventRecord(compute_done_, compute_);
  if (status == cudaSuccess) status = cudaStreamWaitEvent(stream_, compute_done_, 0);
  if (status != cudaSuccess) return failed(what, cuda_error(status));
  return Status::success();
}

Status NcclComm::all_reduce_sum(float* data, std::size_t count) {
  if (Status s = after_compute("all_reduce"); !s) return s;
  return settle(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_), "all_reduce");
}

Status NcclComm::reduce_scatter_sum(float* out, const float* in, std::size_t out_count) {
  if (Status s = after_compute("reduce_scatter"); !s) return s;
  return settle(ncclReduceScatter(in, out, out_count, ncclFloat32, ncclSum, comm_, stream_), "reduce_scatter");
}

Status NcclComm::all_gather(float* out, const float* in, std::size_t in_count) {
  if (Status s = after_compute("all_gather"); !s) return s;
  return settle(ncclAllGather(in, out, in_count, ncclFloat32, comm_, stream_), "all_gather");
}

Status NcclComm::exchange(const float* send, std::size_t send_count, int send_peer, float* recv,
                          std::size_t recv_count, int recv_peer) {
  if (Status s = after_compute("send/recv"); !s) return s;
  if (Status s = settle(ncclGroupStart(), "ncclGroupStart"); !s) return s;
  ncclResult_t r = ncclSuccess;
  if (send_peer >= 0) r = ncclSend(send, send_count, ncclFloat32, send_peer, comm_, stream_);
  if (recv_peer >= 0 && (r == ncclSuccess || r == ncclInProgress))
    r = ncclRecv(recv, recv_count, ncclFloat32, recv_peer, comm_, stream_);
  const ncclResult_t end = ncclGroupEnd();
  return settle(r != ncclSuccess && r != ncclInProgress ? r : end, "send/recv");
}

Status NcclComm::compute_waits() {
  if (aborted()) return failed("compute_waits", "the communicator was aborted");
  cudaError_t status = cudaEventRecord(comm_done_, stream_);
  if (status == cudaSuccess) status = cudaStreamWaitEvent(compute_, comm_done_, 0);
  if (status != cudaSuccess) return failed("compute_waits", cuda_error(status));
  return Status::success();
}

Expected<bool> NcclComm::finished() {
  if (aborted()) return failed("wait", "the communicator was aborted");
  const cudaError_t status = cudaStreamQuery(stream_);
  if (status == cudaSuccess) return true;
  if (status != cudaErrorNotReady) {
    abort();
    return failed("wait", cuda_error(status));
  }
  ncclResult_t r = ncclSuccess;
  ncclCommGetAsyncError(comm_, &r);
  if (r != ncclSuccess && r != ncclInProgress) {
    const std::string cause = std::string(ncclGetErrorString(r)) + " (" + ncclGetLastError(comm_) + ")";
    abort();
    return failed("wait", cause);
  }
  return false;
}

Status NcclComm::wait(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    auto done = finished();
    if (!done) return done.error();
    if (*done) return Status::success();
    if (Clock::now() > deadline) {
      abort();
      return failed("wait", "no progress within " + std::to_string(timeout.count()) + " ms (a lost peer?)");
    }
    std::this_thread::yield();
  }
}

}  // namespace troupe::comm
