// troupe bench allreduce: the data plane's bus bandwidth beside UCX's own point-to-point
// bandwidth, measured in the same run (comm/bench). Ranks are forked by comm's local bootstrap,
// so this runs before this process starts any thread.

#include <cstdio>

#include "apps/commands/commands.hpp"
#include "apps/exit_codes.hpp"
#include "comm/bench/allreduce_bench.hpp"

namespace troupe::apps {

int run_bench_allreduce(const comm::AllReduceBenchOptions& options) {
  auto report = comm::bench_allreduce(options);
  if (!report) return error_exit(ExitCode::failure, report.error().message);
  std::fputs(comm::format_allreduce_report(*report).c_str(), stdout);
  return to_int(ExitCode::success);
}

}  // namespace troupe::apps
