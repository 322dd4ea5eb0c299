// troupe bench allreduce: the data plane's bus bandwidth beside UCX's own point-to-point
// bandwidth, measured in the same run (comm/bench). Ranks are forked by comm's local bootstrap,
// so this runs before this process starts any thread. With --hosts N the ranks run on the hosts
// scripts/netns-cluster.sh simulates (docs/multi-host.md): each forked rank enters its host's
// namespaces before it starts UCX, so ranks on different hosts meet over TCP only.

#include <cstdio>
#include <string>

#include "apps/bench/bench_commands.hpp"
#include "apps/bench/simulated_hosts.hpp"
#include "apps/exit_codes.hpp"
#include "comm/bench/allreduce_bench.hpp"

namespace troupe::apps {
int run_bench_allreduce(comm::AllReduceBenchOptions options) {
  if (options.hosts > 1) {
    for (int processes : options.processes)
      if (processes < options.hosts)
        return error_exit(ExitCode::bad_input, "--hosts " + std::to_string(options.hosts) + " needs at least " +
                                                   std::to_string(options.hosts) + " processes, got --processes " +
                                                   std::to_string(processes));
    if (Status hosts = check_simulated_hosts("bench allreduce", options.hosts); !hosts)
      return error_exit(ExitCode::bad_input, hosts.error().message);
    options.enter_host = enter_simulated_host;
    options.host_name = [](int host) { return "h" + std::to_string(host); };
  }
  auto report = comm::bench_allreduce(options);
  if (!report) return error_exit(ExitCode::failure, report.error().message);
  std::fputs(comm::format_allreduce_report(*report).c_str(), stdout);
  return to_int(ExitCode::success);
}

}  // namespace troupe::apps
