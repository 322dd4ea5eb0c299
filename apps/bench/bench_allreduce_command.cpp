// troupe bench allreduce: the data plane's bus bandwidth beside UCX's own point-to-point
// bandwidth, measured in the same run (comm/bench). Ranks are forked by comm's local bootstrap,
// so this runs before this process starts any thread. With --hosts N the ranks run on the hosts
// scripts/netns-cluster.sh simulates (docs/multi-host.md): each forked rank enters its host's
// namespaces before it starts UCX, so ranks on different hosts meet over TCP only.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

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

Command add_bench_allreduce_command(CLI::App& bench) {
  auto options = std::make_shared<comm::AllReduceBenchOptions>();
  auto mib = std::make_shared<std::vector<int>>(std::vector<int>{1, 16, 64});
  CLI::App* command =
      bench.add_subcommand("allreduce", "All-reduce bus bandwidth beside UCX point-to-point bandwidth.");
  command->add_option("--processes", options->processes, "process counts, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(2, 64))
      ->default_str("2,4");
  command->add_option("--mib", *mib, "buffer sizes in MiB, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096))
      ->default_str("1,16,64");
  command->add_option("--iterations", options->iterations, "timed iterations")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  command
      ->add_option("--hosts", options->hosts,
                   "spread the ranks over this many hosts simulated by scripts/netns-cluster.sh (root)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  return refusing_unknown(*command, [options, mib] {
    options->bytes.clear();
    for (int size : *mib) options->bytes.push_back(std::int64_t{size} << 20);
    return run_bench_allreduce(*options);
  });
}

}  // namespace troupe::apps
