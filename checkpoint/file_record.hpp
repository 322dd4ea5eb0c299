#pragma once
// What one checkpoint file holds and how to recognise it intact: its name in the step folder,
// byte size, hash, the rank that wrote it, and the flat ranges of each kind it stores. The
// manifest lists one record per file; a writer also leaves its record next to the file
// (`<file>.record.json`) so a committer in another process can collect it.

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "compute/expected.hpp"

namespace troupe::checkpoint {

// A kind names what a flat range holds: "param", "adam_m", "adam_v", "grad_accum", ... Any
// non-empty string of [a-z_], so it is safe inside tensor names and file names.
bool valid_kind(std::string_view kind);

// Elements [begin, end) of the flat parameter order (docs/formats/parameter-layout.md).
struct PieceRange {
  std::string kind;
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

struct FileRecord {
  std::string name;  // plain file name inside the step folder
  std::uint64_t bytes = 0;
  std::string hash;  // file_hash.hpp
  int rank = 0;
  std::vector<PieceRange> pieces;
};

nlohmann::json to_json(const FileRecord& record);
// `where` prefixes field names in errors ("files.1.").
Expected<FileRecord> file_record_from_json(const nlohmann::json& json, const std::string& where = "");

// The sidecar a shard writer leaves next to `shard`, and reading one back.
std::filesystem::path record_path(const std::filesystem::path& shard);
Expected<FileRecord> read_record(const std::filesystem::path& sidecar);

}  // namespace troupe::checkpoint
