#pragma once
// manifest.json: everything besides tensors that a resumed run needs to walk on as if it never
// stopped (model, grid, step, optimizer step count, data position, RNG state), plus the record
// of every file so a loader can tell a whole checkpoint from a torn one. Fields and an example:
// docs/formats/checkpoint.md.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "checkpoint/file_record.hpp"
#include "compute/expected.hpp"
#include "compute/model/gpt_config.hpp"

namespace troupe::checkpoint {

// The version of the folder layout, manifest fields, shard naming and hash. A build reads only
// its own version and refuses any other with a message naming both.
inline constexpr int format_version = 1;

struct Grid {
  int dp = 1;
  int pp = 1;
  int tp = 1;
};

// Where the data sampler stands. Data order is a pure function of (seed, epoch, global sample
// index), so the seed and the global count of samples consumed place a resumed run exactly.
struct DataPosition {
  std::uint64_t seed = 0;
  std::uint64_t samples_consumed = 0;
  std::optional<std::uint64_t> val_position;  // where validation batches stand, when they advance
};

// A counter-based generator's state: its seed and whatever words it keeps (counters, offsets).
struct RngState {
  std::uint64_t seed = 0;
  std::vector<std::uint64_t> words;
};

struct Manifest {
  int format_version = checkpoint::format_version;
  compute::GPTConfig model;
  nlohmann::json job_config = nlohmann::json::object();  // the job's configuration, for the record
  Grid grid;
  std::int64_t step = 0;
  std::int64_t optimizer_steps = 0;
  DataPosition data;
  RngState rng;
  std::string hash_algorithm;  // of every file; set by the store's commit
  std::vector<FileRecord> files;
};

nlohmann::json to_json(const Manifest& manifest);
// Errors name the first missing or mistyped field: "field 'grid.dp' is missing". The format
// version is checked before anything else, so a later format is refused by version, not by
// whichever field it renamed.
Expected<Manifest> manifest_from_json(const nlohmann::json& json);

}  // namespace troupe::checkpoint
