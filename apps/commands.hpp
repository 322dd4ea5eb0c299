#pragma once
// The commands main() runs once the command line has been parsed and checked. Each returns the
// process exit code: 0 on success, 1 on a run-time failure. Mistakes in the user's input never
// reach them: main rejects those first, with exit code 2.

#include <string>
#include <vector>

#include "apps/resolved_job.hpp"
#include "compute/expected.hpp"

namespace troupe::apps {

// troupe bench compute: forward/backward/update throughput of one worker per model preset.
struct BenchComputeOptions {
  std::vector<std::string> models;  // preset names
  int batch = 8;
  int threads = 1;
  int steps = 10;  // measured steps (figures from the median)
  int warmup = 1;  // unmeasured steps first
};

// troupe train: trains job.model on job.config's data and reports loss, validation and a sample.
int run_train(const ResolvedJob& job);
int run_bench_compute(const BenchComputeOptions& options);
// The first problem with options (unknown model, count out of range) as a one-line error.
Status validate(const BenchComputeOptions& options);

}  // namespace troupe::apps
