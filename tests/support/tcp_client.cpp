#include "support/tcp_client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

namespace troupe::test {
namespace {

using Clock = std::chrono::steady_clock;

sockaddr_in loopback(const std::string& address, int port) {
  sockaddr_in where{};
  where.sin_family = AF_INET;
  where.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, address.c_str(), &where.sin_addr);
  return where;
}

}  // namespace

TcpClient::TcpClient(int port, const std::string& source) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  const sockaddr_in from = loopback(source, 0), to = loopback("127.0.0.1", port);
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0 ||
      (::connect(fd_, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS)) {
    ::close(fd_);
    fd_ = -1;
  }
}

TcpClient::~TcpClient() {
  if (fd_ >= 0) ::close(fd_);
}

TcpClient::TcpClient(TcpClient&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

void TcpClient::send(const std::string& bytes) {
  pollfd writable{fd_, POLLOUT, 0};
  if (::poll(&writable, 1, 5000) > 0) (void)!::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
}

bool TcpClient::receive(std::size_t bytes, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  char buffer[4096];
  while (bytes > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd readable{fd_, POLLIN, 0};
    if (left <= 0 || ::poll(&readable, 1, static_cast<int>(left)) <= 0) return false;
    const ssize_t got = ::recv(fd_, buffer, std::min(bytes, sizeof buffer), 0);
    if (got <= 0) return false;
    bytes -= static_cast<std::size_t>(got);
  }
  return true;
}

bool TcpClient::closed_by_server(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd readable{fd_, POLLIN, 0};
    if (left <= 0 || ::poll(&readable, 1, static_cast<int>(left)) <= 0) return false;
    const ssize_t got = ::recv(fd_, buffer, sizeof buffer, 0);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
}

double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string stat{std::istreambuf_iterator<char>(in), {}};
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::vector<std::string> after_name{std::istream_iterator<std::string>(fields), {}};
  if (after_name.size() < 13) return 0;
  return (std::stod(after_name[11]) + std::stod(after_name[12])) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

int open_descriptors(pid_t pid) {
  std::error_code ignored;
  const std::filesystem::directory_iterator entries("/proc/" + std::to_string(pid) + "/fd", ignored);
  return static_cast<int>(std::distance(entries, std::filesystem::directory_iterator{}));
}

}  // namespace troupe::test
