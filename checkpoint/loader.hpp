#pragma once
// Opening a committed checkpoint and reading any flat range out of it, whatever grid wrote it.
// A folder is valid when its manifest parses with our format version and every file listed has
// its recorded size and hash; open_newest_valid skips invalid ones (a torn write, a flipped
// bit) newest first and says why, so a run resumes from the newest checkpoint it can trust.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/manifest.hpp"
#include "checkpoint/shard.hpp"
#include "compute/expected.hpp"
#include "compute/model/gpt_config.hpp"

namespace troupe::checkpoint {

struct NewestCheckpoint;

class LoadedCheckpoint {
 public:
  const std::filesystem::path& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  bool holds(const std::string& kind) const { return segments_.contains(kind); }

  // Fills `out` with elements [begin, end) of `kind` in the flat order, assembled from whatever
  // pieces the files hold (any ranks, whole tensors or slices). This is resharding: a grid reads
  // its own ranges, not the writer's. An element no file holds is an error naming the range.
  // A token piece's elements (shard.hpp) read as zeros; `out` inside a token tensor
  // (compute::is_token_memory) is left as it is, the range only checked for being held.
  Status read(const std::string& kind, std::int64_t begin, std::int64_t end, std::span<float> out) const;
  // All of `kind`, the whole flat order of the manifest's model.
  Expected<std::vector<float>> read_all(const std::string& kind) const;
  // The ranges [begin, end) of `kind` stored with their values, in order: all it holds but the
  // token pieces'.
  std::vector<std::pair<std::int64_t, std::int64_t>> value_ranges(const std::string& kind) const;

 private:
  friend Expected<LoadedCheckpoint> open_checkpoint(const std::filesystem::path& step_folder);
  friend Expected<NewestCheckpoint> open_newest_valid(const std::filesystem::path& dir);
  // Errors start with `label` ("checkpoint DIR/step-0000040" or "skipped step-0000040").
  static Expected<LoadedCheckpoint> load(const std::filesystem::path& dir, const std::string& label);

  // A run of the flat order served by one stored piece; per kind, sorted and not overlapping.
  struct Segment {
    std::int64_t begin;
    std::int64_t end;
    const std::byte* bytes;  // the floats of [begin, end), inside a mapped shard; null for a token piece's
  };

  std::filesystem::path dir_;
  Manifest manifest_;
  std::vector<Shard> shards_;  // keep the mappings the segments point into
  std::map<std::string, std::vector<Segment>> segments_;
};

// An explicit folder (DIR/step-NNNNNNN). Errors start with "checkpoint <folder>: ", e.g.
// "checkpoint ckpt/step-0000040: format version 2; this build reads 1".
Expected<LoadedCheckpoint> open_checkpoint(const std::filesystem::path& step_folder);

// A committed folder a resume passed over: its step, and one line saying why ("skipped
// step-0000040: rank-00001.safetensors has hash 0123..., the manifest says 4567...").
struct SkippedCheckpoint {
  std::int64_t step = 0;
  std::string why;
  bool operator==(const SkippedCheckpoint&) const = default;
};

struct NewestCheckpoint {
  std::optional<LoadedCheckpoint> checkpoint;  // nullopt: no valid checkpoint (a fresh start)
  std::vector<SkippedCheckpoint> skipped;      // newest first
};

// Tries DIR's committed folders newest first (staging folders are never candidates). A missing
// DIR is no checkpoint, not an error; an unreadable one is an error.
Expected<NewestCheckpoint> open_newest_valid(const std::filesystem::path& dir);

// Whether a checkpoint fits the caller's model; the error names the first differing field:
// "checkpoint was written for n_layer 6, this model has 4".
Status check_model(const Manifest& manifest, const compute::GPTConfig& model);

}  // namespace troupe::checkpoint
