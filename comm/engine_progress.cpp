// An engine's progress: UCX's context and worker made, the one thread that progresses them, the
// tasks other threads hand it, its sleep while nothing moves, and the shutdown.
#include <poll.h>
#include <pthread.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/engine_state.hpp"
#include "comm/knobs.hpp"
#include "comm/sysv_segments.hpp"
#include "compute/memory_ledger.hpp"

namespace troupe::comm {
namespace {

// UCX settings Troupe chooses unless the environment sets them (UCX_<name>), and where a simulated
// rank (train.backend sim) takes another.
struct UcxDefault {
  const char* name;
  const char* value;                // null: UCX's own
  const char* sim_value = nullptr;  // null: the same as `value`
};
constexpr UcxDefault ucx_defaults[] = {
    // A silent dead peer is noticed within seconds, not 20 s. A simulated rank learns a peer's
    // death from the job, which aborts its operations; over shared memory the keepalive reads every
    // peer's /proc/PID/stat each interval, and a thousand ranks on one host doing that once a
    // second took a tenth of its CPU and doubled an in-place recovery (docs/scale.md).
    {"KEEPALIVE_INTERVAL", "1s", "10s"},
    {"MM_ERROR_HANDLING", "y"},  // shared memory (posix, sysv) may serve endpoints with peer
                                 // error handling: UCX checks the peer process is alive;
                                 // without it such endpoints fall back to TCP over loopback
    // A simulated rank's messages are tokens or real bytes under 64 KiB: eager, a send is done once
    // copied, where a rendezvous waits for the peer's thread, one of a thousand, to answer twice
    // (docs/comm.md). A real rank keeps UCX's choice.
    {"RNDV_THRESH", nullptr, "inf"},
    {"MM_SEG_SIZE", "32k"},  // FIFO element: a quarter of the fragments of the default 8k;
                             // 2-process all-reduce about 10% faster (docs/comm.md)
};

thread_local const void* progress_thread_state = nullptr;

// Where a simulated rank's worker failed for want of System V segments, what UCX's "Out of memory"
// means; empty otherwise.
std::string sysv_segments_taken() {
  const std::optional<SysvSegments> segments = sysv_segments();
  if (!segments || segments->in_use + sysv_segments_per_sim_rank <= segments->limit) return {};
  return "; this host's System V shared memory segments are taken (" + std::to_string(segments->in_use) +
         " of kernel.shmmni's " + std::to_string(segments->limit) + " in use) and a simulated rank's worker takes " +
         std::to_string(sysv_segments_per_sim_rank) + ": raise kernel.shmmni or put fewer ranks on this host";
}

}  // namespace

Engine::State::~State() {
  if (worker != nullptr) ucp_worker_destroy(worker);
  if (lent_region != nullptr) {
    ucp_mem_unmap(context, lent_region);
    compute::memory_ledger().remove(compute::MemoryKind::comm_buffers, lent_bytes);
  }
  if (context != nullptr) ucp_cleanup(context);
}

bool Engine::State::is_progress_thread() const { return progress_thread_state == this; }

Status Engine::State::open(EngineAddress& address) {
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK)
    return Error{std::string("comm: cannot read the UCX configuration: ") + ucs_status_string(status)};
  for (const UcxDefault& d : ucx_defaults) {
    if (std::getenv((std::string("UCX_") + d.name).c_str()) != nullptr) continue;
    if (std::string_view(d.name).starts_with("MM_") && !shared_memory_enabled()) continue;
    const char* chosen = wire && d.sim_value != nullptr ? d.sim_value : d.value;
    if (chosen != nullptr) ucp_config_modify(config, d.name, chosen);
  }
  // A simulated rank's bytes take the wire model's time, not the transport's, and hundreds share
  // a host: one shared-memory transport (sysv) of UCX's two. Each opens its own FIFOs a worker;
  // without posix's, 128 ranks in 4 processes resided at 2.0 GiB less (docs/scale.md).
  if (wire && sim_transports_are_troupes()) ucp_config_modify(config, "TLS", "^posix");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP | UCP_FEATURE_RMA;  // RMA: the lent region
  status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (status != UCS_OK) return Error{std::string("comm: cannot initialise UCX: ") + ucs_status_string(status)};

  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;  // only the progress thread touches it
  status = ucp_worker_create(context, &worker_params, &worker);
  if (status != UCS_OK)
    return Error{std::string("comm: cannot create the UCX worker: ") + ucs_status_string(status) +
                 (wire ? sysv_segments_taken() : std::string())};
  status = ucp_worker_get_efd(worker, &event_fd);
  if (status != UCS_OK) return Error{std::string("comm: no UCX event fd: ") + ucs_status_string(status)};

  ucp_address_t* own = nullptr;
  std::size_t own_length = 0;
  status = ucp_worker_get_address(worker, &own, &own_length);
  if (status != UCS_OK) return Error{std::string("comm: no UCX worker address: ") + ucs_status_string(status)};
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(own);
  address.worker.assign(bytes, bytes + own_length);
  ucp_worker_release_address(worker, own);
  return {};
}

void Engine::State::run() {
  progress_thread_state = this;
  pthread_setname_np(pthread_self(), "comm.progress");  // named in top, perf and /proc
  post_handshake_receive();
  auto last_work = std::chrono::steady_clock::now();
  auto next_busy_sleep = busy_sleep;
  while (!stopping) {
    bool worked = run_tasks();
    while (ucp_worker_progress(worker) != 0) worked = true;
    worked = drain() || worked;
    worked = give_up_late_handshakes() || worked;
    const auto now = std::chrono::steady_clock::now();
    if (worked) {
      last_work = now;
      next_busy_sleep = busy_sleep;
      continue;
    }
    // Past the spin after the last work, receives alone in flight sleep as long as idle: each
    // arrival wakes the worker's event fd, so only a send UCX still holds (behind a full FIFO,
    // which raises no event when it drains, or a rendezvous) needs naps. A stage whose next input
    // is posted early would otherwise nap 200 us at a time through its whole forward, each wake-up
    // taking a core from a compute thread; the spin keeps a message's later fragments from each
    // waiting for a wake-up (docs/comm.md, "Sleeping").
    if (operations.empty()) {
      sleep_until_event(idle_sleep);
    } else if (now - last_work < spin) {
      std::this_thread::yield();
    } else if (!sends_held_by_ucx()) {
      sleep_until_event(idle_sleep);
    } else {
      sleep_until_event(next_busy_sleep);
      next_busy_sleep = std::min(next_busy_sleep * 2, busy_sleep_limit);
    }
  }
  shut_down();
}

bool Engine::State::run_tasks() {
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard lock(mutex);
    batch.swap(tasks);
  }
  for (auto& task : batch) task();
  return !batch.empty();
}

bool Engine::State::sends_held_by_ucx() const {
  for (const auto& [id, op] : operations)
    if (!op.recv && op.request != nullptr) return true;
  return false;
}

// Sleeps on the worker's event fd, at most `limit`, unless an event or a task is waiting.
void Engine::State::sleep_until_event(std::chrono::nanoseconds limit) {
  if (ucp_worker_arm(worker) == UCS_ERR_BUSY) return;
  {
    std::lock_guard lock(mutex);
    if (!tasks.empty() || !failed_peers.empty() || stopping) return;
  }
  pollfd fd{event_fd, POLLIN, 0};
  const timespec timeout{static_cast<time_t>(limit.count() / 1000000000),
                         static_cast<long>(limit.count() % 1000000000)};
  ppoll(&fd, 1, &timeout, nullptr);
}

// After stop: every endpoint is force-closed and every operation left gets an Error, those
// that callbacks and tasks post on the way included.
void Engine::State::shut_down() {
  for (auto& [id, op] : operations) {
    if (op.recv && op.request != nullptr) ucp_request_cancel(worker, op.request);
  }
  if (handshake_receive != nullptr) ucp_request_cancel(worker, handshake_receive);
  for (auto& peer : peers) close_endpoint(*peer);
  for (void* request : closing) {
    while (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_worker_progress(worker);
    ucp_request_free(request);
  }
  closing.clear();
  while (ucp_worker_progress(worker) != 0) {
  }
  discard_unexpected();
  while (run_tasks() || drain()) {
  }
  // What UCX still holds (a send it could not cancel) keeps its record, without a callback,
  // until the worker is destroyed.
  std::vector<RequestId> left;
  for (const auto& [id, op] : operations) {
    if (op.done) left.push_back(id);
  }
  for (RequestId id : left) {
    auto it = operations.find(id);
    if (it == operations.end() || !it->second.done) continue;
    complete(it->second, Error{"comm: the engine of " + rank_name(rank) + " stopped"});
  }
  while (run_tasks() || drain()) {
  }
}

void Engine::State::discard_unexpected() {
  // A message longer than the scratch completes truncated, which drops it as well. One that is
  // still in progress after a second (a rendezvous from a peer that went) is cancelled, and one
  // that outlasts its cancel by another second is left to the worker's destruction.
  constexpr std::size_t scratch_bytes = 64 << 10;
  std::vector<std::byte> scratch(scratch_bytes);
  const auto cancel_after = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  const auto give_up_after = cancel_after + std::chrono::seconds(1);
  for (;;) {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h message = ucp_tag_probe_nb(worker, 0, 0, 1, &info);
    if (message == nullptr) return;
    ucp_request_param_t param{};
    void* request = ucp_tag_msg_recv_nbx(worker, scratch.data(), scratch.size(), message, &param);
    if (request == nullptr || UCS_PTR_IS_ERR(request)) continue;
    bool cancelled = false;
    while (ucp_request_check_status(request) == UCS_INPROGRESS) {
      const auto now = std::chrono::steady_clock::now();
      if (now > give_up_after) return;
      if (now > cancel_after && !cancelled) {
        ucp_request_cancel(worker, request);
        cancelled = true;
      }
      ucp_worker_progress(worker);
    }
    ucp_request_free(request);
  }
}

}  // namespace troupe::comm
