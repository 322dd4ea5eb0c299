#pragma once
// From what the user asked for to what a job runs: resolve() applies the model preset and its
// overrides, fills in the values that default to others (train.seq_len 0 → model.block_size),
// and rejects every value a job could not use, before any data is read or memory is allocated.
// A job that resolves can still fail at run time (a missing corpus file, an unavailable backend),
// but not because of a number out of range.

#include "apps/config/job_config.hpp"
#include "compute/expected.hpp"
#include "compute/model/gpt_config.hpp"

namespace troupe::apps {

// The error is one line naming the key, its value and what is wrong with it, e.g.
// "train.seq_len 512 exceeds model.block_size 256".
Expected<ResolvedJob> resolve(const JobConfig& config);

// The model the model.* keys ask for: the preset, each key given replacing the preset's figure
// (troupe train's and troupe plan's alike); an error names the key.
Expected<compute::GPTConfig> resolve_model(const ModelOptions& options);

}  // namespace troupe::apps
