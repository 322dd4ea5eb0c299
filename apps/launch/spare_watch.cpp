#include "apps/launch/spare_watch.hpp"

#include <algorithm>

namespace troupe::launch {

SpareWatch::SpareWatch(Options options) : options_(std::move(options)) {}

SpareWatch::~SpareWatch() { stop(); }

void SpareWatch::start() {
  if (options_.host_file.empty() || options_.left_out_slots.empty() || thread_.joinable()) return;
  thread_ = std::thread([this] { watch(); });
}

void SpareWatch::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<HostEntry> SpareWatch::found() {
  std::lock_guard lock(mutex_);
  return found_;
}

std::vector<HostEntry> SpareWatch::new_spares(const HostFile& file) const {
  // A line is known while an equal one (host and slots) is left to match it, so a second line for
  // a host the job already has as a spare counts as new.
  std::vector<HostEntry> known = options_.known_spares;
  std::vector<int> wanted = options_.left_out_slots;
  std::vector<HostEntry> found;
  for (const HostEntry& spare : file.spares) {
    const auto same = std::find_if(known.begin(), known.end(), [&](const HostEntry& k) {
      return k.host == spare.host && k.slots == spare.slots;
    });
    if (same != known.end()) {
      known.erase(same);
      continue;
    }
    const auto fits = std::find_if(wanted.begin(), wanted.end(), [&](int slots) { return slots <= spare.slots; });
    if (fits == wanted.end()) continue;
    wanted.erase(fits);
    found.push_back(spare);
  }
  return found;
}

void SpareWatch::watch() {
  auto last_grow = std::chrono::steady_clock::time_point{};
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, options_.period, [this] { return stopping_; })) {
    lock.unlock();
    Expected<HostFile> file = read_host_file(options_.host_file);
    std::vector<HostEntry> found = file ? new_spares(*file) : std::vector<HostEntry>{};
    const auto now = std::chrono::steady_clock::now();
    const bool grow = !found.empty() && now - last_grow >= options_.retry;
    if (grow) {
      last_grow = now;
      options_.grow(found);
    }
    lock.lock();
    if (!found.empty()) found_ = std::move(found);
  }
}

}  // namespace troupe::launch
