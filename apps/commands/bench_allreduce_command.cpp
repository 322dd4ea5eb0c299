// troupe bench allreduce: the data plane's bus bandwidth beside UCX's own point-to-point
// bandwidth, measured in the same run (comm/bench). Ranks are forked by comm's local bootstrap,
// so this runs before this process starts any thread.

#include <cstdio>

#include "apps/commands/commands.hpp"
#include "comm/bench/allreduce_bench.hpp"

namespace troupe::apps {

int run_bench_allreduce(const comm::AllReduceBenchOptions& options) {
  auto report = comm::bench_allreduce(options);
  if (!report) {
    std::fprintf(stderr, "troupe: error: %s\n", report.error().message.c_str());
    return 1;
  }
  std::fputs(comm::format_allreduce_report(*report).c_str(), stdout);
  return 0;
}

}  // namespace troupe::apps
