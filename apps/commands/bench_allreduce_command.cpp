// troupe bench allreduce: the data plane's bus bandwidth beside UCX's own point-to-point
// bandwidth, measured in the same run (comm/bench). Ranks are forked by comm's local bootstrap,
// so this runs before this process starts any thread. With --hosts N the ranks run on the hosts
// scripts/netns-cluster.sh simulates (docs/multi-host.md): each forked rank enters its host's
// namespaces before it starts UCX, so ranks on different hosts meet over TCP only.

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "apps/commands/commands.hpp"
#include "apps/exit_codes.hpp"
#include "comm/bench/allreduce_bench.hpp"

namespace troupe::apps {
namespace {

// The namespace files of simulated host h<index>, as scripts/netns-cluster.sh keeps them, with the
// kind of each.
std::vector<std::pair<std::string, int>> host_namespaces(int index) {
  const std::string host = "h" + std::to_string(index), kept = "/run/troupe-netns-cluster/" + host + "/";
  return {{"/run/netns/troupe-" + host, CLONE_NEWNET},
          {kept + "ipc", CLONE_NEWIPC},
          {kept + "uts", CLONE_NEWUTS},
          {kept + "mnt", CLONE_NEWNS}};
}

// Moves this process (single-threaded: a rank just forked) into simulated host h<index>. Every file
// is opened first: once in the host's mount namespace, the cluster's folder may not be there.
Status enter_simulated_host(int index) {
  std::vector<std::pair<int, int>> opened;
  Status status = Status::success();
  for (const auto& [path, kind] : host_namespaces(index)) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      status = Error{"bench allreduce --hosts: cannot open " + path + ": " + std::strerror(errno)};
      break;
    }
    opened.emplace_back(fd, kind);
  }
  for (const auto& [fd, kind] : opened) {
    if (status && ::setns(fd, kind) != 0)
      status = Error{"bench allreduce --hosts: cannot enter host h" + std::to_string(index) + ": " + std::strerror(errno)};
    ::close(fd);
  }
  return status;
}

}  // namespace

int run_bench_allreduce(comm::AllReduceBenchOptions options) {
  if (options.hosts > 1) {
    for (int processes : options.processes)
      if (processes < options.hosts)
        return error_exit(ExitCode::bad_input, "--hosts " + std::to_string(options.hosts) + " needs at least " +
                                                   std::to_string(options.hosts) + " processes, got --processes " +
                                                   std::to_string(processes));
    for (int host = 0; host < options.hosts; ++host)
      for (const auto& [path, kind] : host_namespaces(host))
        if (::access(path.c_str(), R_OK) != 0)
          return error_exit(ExitCode::bad_input, "--hosts " + std::to_string(options.hosts) + ": no simulated host h" +
                                                     std::to_string(host) + " (" + path + ": " + std::strerror(errno) +
                                                     "); start them with scripts/netns-cluster.sh up " +
                                                     std::to_string(options.hosts));
    options.enter_host = enter_simulated_host;
    options.host_name = [](int host) { return "h" + std::to_string(host); };
  }
  auto report = comm::bench_allreduce(options);
  if (!report) return error_exit(ExitCode::failure, report.error().message);
  std::fputs(comm::format_allreduce_report(*report).c_str(), stdout);
  return to_int(ExitCode::success);
}

}  // namespace troupe::apps
