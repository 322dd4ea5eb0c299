#include "apps/launch/unclaimed_port.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

namespace troupe::launch {

namespace {

// Where the kernel's ephemeral range starts (Linux's default when /proc does not say).
int ephemeral_range_start() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  return range >> low && low > 2048 ? low : 32768;
}

bool can_bind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return bound;
}

}  // namespace

Expected<int> unclaimed_port(int count) {
  // Ports from 1024 up to the ephemeral range are named only by whoever chose them; picking at
  // random keeps two callers choosing at once apart.
  const int high = ephemeral_range_start() - count;
  std::random_device seed;
  std::mt19937 generator(seed());
  std::uniform_int_distribution<int> pick(1024, high);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int first = pick(generator);
    bool free = true;
    for (int port = first; free && port < first + count; ++port) free = can_bind(port);
    if (free) return first;
  }
  return Error{"cannot find " + std::to_string(count) +
               " free consecutive loopback ports below the ephemeral range: " + std::strerror(errno)};
}

}  // namespace troupe::launch
