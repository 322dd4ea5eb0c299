#pragma once
// The process's resident set as the kernel counts it, now and at its peak. Header-only, so that
// monitor/ (which links no compute library) reads it the same way the memory ledger does.

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace troupe::compute {

// Resident pages (/proc/self/statm's second field) times the page size; 0 without /proc.
inline std::uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long total_pages = 0, resident_pages = 0;
  if (!(statm >> total_pages >> resident_pages)) return 0;
  return static_cast<std::uint64_t>(resident_pages) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

// The resident set's peak since the process started (VmHWM in /proc/self/status); 0 without /proc.
inline std::uint64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    std::uint64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

}  // namespace troupe::compute
