// troupe_comm_bench: all-reduce bus bandwidth beside UCX's point-to-point bandwidth, until
// `troupe bench allreduce` calls the same code.
//
//   build/comm/troupe_comm_bench                          # 2 and 4 processes; 1, 16, 64 MiB
//   build/comm/troupe_comm_bench --processes 2 --mib 64   # one cell
//   UCX_TLS=sm,self build/comm/troupe_comm_bench          # any UCX_* or TROUPE_COMM_* knob
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "comm/bench/allreduce_bench.hpp"

namespace {

std::vector<long> numbers(const char* text) {
  std::vector<long> values;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) values.push_back(std::atol(item.c_str()));
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  troupe::comm::AllReduceBenchOptions options;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--processes") == 0) {
      options.processes.clear();
      for (long p : numbers(argv[i + 1])) options.processes.push_back(static_cast<int>(p));
    } else if (std::strcmp(argv[i], "--mib") == 0) {
      options.bytes.clear();
      for (long m : numbers(argv[i + 1])) options.bytes.push_back(m << 20);
    } else if (std::strcmp(argv[i], "--iterations") == 0) {
      options.iterations = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--processes 2,4] [--mib 1,16,64] [--iterations 15]\n", argv[0]);
      return 2;
    }
  }
  auto report = troupe::comm::bench_allreduce(options);
  if (!report) {
    std::fprintf(stderr, "troupe_comm_bench: error: %s\n", report.error().message.c_str());
    return 1;
  }
  std::fputs(troupe::comm::format_allreduce_report(*report).c_str(), stdout);
  return 0;
}
