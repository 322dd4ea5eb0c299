#include "apps/bench/simulated_hosts.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

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

}  // namespace

Status check_simulated_hosts(const char* bench, int hosts) {
  for (int host = 0; host < hosts; ++host)
    for (const auto& [path, kind] : host_namespaces(host))
      if (::access(path.c_str(), R_OK) != 0)
        return Error{std::string(bench) + " --hosts " + std::to_string(hosts) + ": no simulated host h" +
                     std::to_string(host) + " (" + path + ": " + std::strerror(errno) +
                     "); start them with scripts/netns-cluster.sh up " + std::to_string(hosts)};
  return Status::success();
}

Expected<int> usable_simulated_hosts(const char* bench, int hosts) {
  if (hosts <= 1) return hosts;
  if (::geteuid() != 0) {
    std::printf(
        "%s: not root, so no simulated hosts (scripts/netns-cluster.sh needs root): the ranks run on this host, "
        "over its shared memory\n",
        bench);
    return 1;
  }
  if (Status up = check_simulated_hosts(bench, hosts); !up) return up.error();
  return hosts;
}

// Every file is opened first: once in the host's mount namespace, the cluster's folder may not be there.
Status enter_simulated_host(int index) {
  std::vector<std::pair<int, int>> opened;
  Status status = Status::success();
  for (const auto& [path, kind] : host_namespaces(index)) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      status = Error{"simulated hosts: cannot open " + path + ": " + std::strerror(errno)};
      break;
    }
    opened.emplace_back(fd, kind);
  }
  for (const auto& [fd, kind] : opened) {
    if (status && ::setns(fd, kind) != 0)
      status = Error{"simulated hosts: cannot enter host h" + std::to_string(index) + ": " + std::strerror(errno)};
    ::close(fd);
  }
  return status;
}

Status shape_simulated_hosts(int hosts, const std::string& rate) {
  const std::string verb = rate.empty() ? "del" : "replace";
  // Taking off a shaping that is not there fails harmlessly.
  const std::string what = rate.empty() ? " 2>/dev/null" : " tbf rate " + rate + " burst 256kb latency 100ms";
  for (int host = 0; host < hosts; ++host) {
    const std::string h = "h" + std::to_string(host);
    // The host's eth0 sends, the bridge's end of its cable delivers to it (netns-cluster.sh's shape()).
    for (const std::string& device : {"tc -n troupe-" + h + " qdisc " + verb + " dev eth0 root",
                                      "tc qdisc " + verb + " dev troupe-" + h + "-v root"}) {
      const std::string command = device + what;
      if (std::system(command.c_str()) != 0 && !rate.empty()) return Error{"simulated hosts: '" + command + "' failed"};
    }
  }
  return Status::success();
}

}  // namespace troupe::apps
