#pragma once
// Reading a TensorBoard run folder with TensorBoard's own reader (scripts/reference/tensorboard_read.py,
// given as `script`): its lines `scalar TAG STEP VALUE` and `text TAG STEP TEXT`; none where the
// tensorboard Python package is absent, after printing `SKIPPED (needs the tensorboard Python
// package …): TEST` on stdout, so the test says by name that it did not run.

#include <optional>
#include <string>

#include "support/run_process.hpp"

namespace troupe::test {

std::optional<ProcessResult> read_with_tensorboard(const std::string& script, const std::string& run_dir,
                                                   const std::string& test_name);

}  // namespace troupe::test
