#include "checkpoint/loader.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "checkpoint/file_hash.hpp"
#include "checkpoint/store.hpp"
#include "compute/model/parameter_layout.hpp"
#include "compute/tensor.hpp"

namespace troupe::checkpoint {
namespace fs = std::filesystem;
namespace {

Expected<nlohmann::json> read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return Error{path.filename().string() + " is missing or unreadable"};
  std::stringstream text;
  text << in.rdbuf();
  auto json = nlohmann::json::parse(text.str(), nullptr, false);
  if (json.is_discarded()) return Error{path.filename().string() + " is not valid JSON"};
  return json;
}

}  // namespace

Expected<LoadedCheckpoint> LoadedCheckpoint::load(const fs::path& dir, const std::string& label) {
  auto fail = [&](const std::string& problem) { return Error{label + ": " + problem}; };
  auto json = read_json(dir / "manifest.json");
  if (!json) return fail(json.error().message);
  // The version first: a later format is refused by its number, whatever else it changed.
  if (json->is_object() && json->contains("format_version") && (*json)["format_version"].is_number_integer() &&
      (*json)["format_version"] != format_version)
    return Error{label + " has format version " + (*json)["format_version"].dump() + "; this build reads " +
                 std::to_string(format_version)};
  auto manifest = manifest_from_json(*json);
  if (!manifest) return fail("manifest.json: " + manifest.error().message);
  if (manifest->hash_algorithm != hash_algorithm)
    return fail("files are hashed with '" + manifest->hash_algorithm + "'; this build checks " + hash_algorithm);
  if (Status valid = compute::validate(manifest->model); !valid)
    return fail("manifest.json: " + valid.error().message);
  const compute::ParameterLayout layout(manifest->model);

  LoadedCheckpoint loaded;
  loaded.dir_ = dir;
  for (const auto& record : manifest->files) {
    auto file = MappedFile::open(dir / record.name);
    if (!file) return fail(file.error().message);
    const auto bytes = file->bytes();
    if (bytes.size() != record.bytes)
      return fail(record.name + " has " + std::to_string(bytes.size()) + " bytes, the manifest says " +
                  std::to_string(record.bytes) + " (torn write?)");
    if (const std::string hash = hash_hex(bytes); hash != record.hash)
      return fail(record.name + " hash mismatch: the file hashes to " + hash + ", the manifest says " + record.hash);
    auto shard = read_shard(std::move(*file), layout);
    if (!shard) return fail(shard.error().message);
    loaded.shards_.push_back(std::move(*shard));
  }

  // Per kind, the stored pieces sorted by start (longest first on a tie), trimmed so that each
  // element comes from the first piece that holds it: replicas may store the same range twice.
  std::map<std::string, std::vector<StoredPiece>> by_kind;
  for (const auto& shard : loaded.shards_)
    for (const auto& piece : shard.pieces) by_kind[piece.kind].push_back(piece);
  for (auto& [kind, pieces] : by_kind) {
    std::sort(pieces.begin(), pieces.end(), [](const StoredPiece& a, const StoredPiece& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
    });
    auto& segments = loaded.segments_[kind];
    std::int64_t covered = 0;
    for (const auto& p : pieces) {
      if (p.token || p.end <= covered) continue;
      const std::int64_t start = std::max(p.begin, covered);
      segments.push_back({start, p.end, p.bytes.data() + (start - p.begin) * sizeof(float)});
      covered = p.end;
    }
    // Token pieces (shard.hpp) hold what no stored piece does.
    std::vector<Segment> gaps;
    std::size_t next = 0;  // the first stored segment not wholly before the token piece
    for (const auto& p : pieces) {
      if (!p.token) continue;
      std::int64_t at = p.begin;
      while (next < segments.size() && segments[next].end <= at) ++next;
      for (std::size_t k = next; k < segments.size() && segments[k].begin < p.end && at < p.end; ++k) {
        if (segments[k].begin > at) gaps.push_back({at, segments[k].begin, nullptr});
        at = std::max(at, segments[k].end);
      }
      if (at < p.end) gaps.push_back({at, p.end, nullptr});
    }
    // Token pieces may overlap each other: keep each element once.
    std::sort(gaps.begin(), gaps.end(), [](const Segment& a, const Segment& b) { return a.begin < b.begin; });
    std::int64_t token_covered = 0;
    for (const Segment& g : gaps) {
      if (g.end <= token_covered) continue;
      segments.push_back({std::max(g.begin, token_covered), g.end, nullptr});
      token_covered = g.end;
    }
    std::sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) { return a.begin < b.begin; });
  }
  loaded.manifest_ = std::move(*manifest);
  return loaded;
}

Expected<std::vector<float>> LoadedCheckpoint::read_all(const std::string& kind) const {
  const std::int64_t total = compute::ParameterLayout(manifest_.model).total();
  std::vector<float> values(static_cast<std::size_t>(total));
  if (Status s = read(kind, 0, total, values); !s) return s.error();
  return values;
}

Status LoadedCheckpoint::read(const std::string& kind, std::int64_t begin, std::int64_t end, std::span<float> out) const {
  TROUPE_CHECK(0 <= begin && begin <= end && static_cast<std::int64_t>(out.size()) == end - begin,
               kind + " [" + std::to_string(begin) + ", " + std::to_string(end) + ") into " + std::to_string(out.size()));
  const auto found = segments_.find(kind);
  if (found == segments_.end()) {
    std::string kinds;
    for (const auto& [k, unused] : segments_) kinds += (kinds.empty() ? "" : ", ") + k;
    return Error{"checkpoint " + dir_.string() + " holds no " + kind + " (it holds " + kinds + ")"};
  }
  const auto& segments = found->second;
  const bool into_token = !out.empty() && compute::is_token_memory(out.data());
  auto seg = std::upper_bound(segments.begin(), segments.end(), begin,
                              [](std::int64_t at, const Segment& s) { return at < s.end; });
  for (std::int64_t at = begin; at < end; ++seg) {
    if (seg == segments.end() || seg->begin > at) {
      const std::int64_t gap_end = seg == segments.end() ? end : std::min(end, seg->begin);
      return Error{"checkpoint " + dir_.string() + ": no file holds " + kind + " elements [" + std::to_string(at) +
                   ", " + std::to_string(gap_end) + ")"};
    }
    const std::int64_t until = std::min(end, seg->end);
    if (into_token) {
      // A token tensor keeps no values: writing them would only make its pages resident.
    } else if (seg->bytes == nullptr) {
      std::fill(out.begin() + (at - begin), out.begin() + (until - begin), 0.0f);
    } else {
      std::memcpy(out.data() + (at - begin), seg->bytes + (at - seg->begin) * sizeof(float),
                  static_cast<std::size_t>(until - at) * sizeof(float));
    }
    at = until;
  }
  return Status::success();
}

std::vector<std::pair<std::int64_t, std::int64_t>> LoadedCheckpoint::value_ranges(const std::string& kind) const {
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  const auto found = segments_.find(kind);
  if (found == segments_.end()) return ranges;
  for (const Segment& s : found->second) {
    if (s.bytes == nullptr) continue;
    if (!ranges.empty() && ranges.back().second == s.begin)
      ranges.back().second = s.end;
    else
      ranges.emplace_back(s.begin, s.end);
  }
  return ranges;
}

Expected<LoadedCheckpoint> open_checkpoint(const fs::path& step_folder) {
  return LoadedCheckpoint::load(step_folder, "checkpoint " + step_folder.string());
}

Expected<NewestCheckpoint> open_newest_valid(const fs::path& dir) {
  auto steps = committed_steps(dir);
  if (!steps) return steps.error();
  NewestCheckpoint newest;
  for (std::int64_t step : *steps) {
    auto loaded = LoadedCheckpoint::load(step_dir(dir, step), "skipped " + step_folder_name(step));
    if (loaded) {
      newest.checkpoint.emplace(std::move(*loaded));
      break;
    }
    newest.skipped.push_back({step, loaded.error().message});
  }
  return newest;
}

Status check_model(const Manifest& manifest, const compute::GPTConfig& model) {
  const compute::GPTConfig& saved = manifest.model;
  const std::pair<const char*, std::pair<int, int>> fields[] = {
      {"n_layer", {saved.n_layer, model.n_layer}},
      {"n_embd", {saved.n_embd, model.n_embd}},
      {"n_head", {saved.n_head, model.n_head}},
      {"block_size", {saved.block_size, model.block_size}},
      {"vocab_size", {saved.vocab_size, model.vocab_size}},
      {"padded_vocab_size", {saved.padded_vocab_size, model.padded_vocab_size}},
      {"experts", {saved.experts, model.experts}},
      {"top_k", {saved.experts > 0 ? saved.top_k : 0, model.experts > 0 ? model.top_k : 0}},
      {"moe_every", {saved.experts > 0 ? saved.moe_every : 1, model.experts > 0 ? model.moe_every : 1}},
      {"shared_experts", {saved.experts > 0 ? saved.shared_experts : 0, model.experts > 0 ? model.shared_experts : 0}},
      {"expert_width",
       {saved.experts > 0 ? static_cast<int>(saved.expert_hidden()) : 0,
        model.experts > 0 ? static_cast<int>(model.expert_hidden()) : 0}},
  };
  for (const auto& [name, values] : fields)
    if (values.first != values.second)
      return Error{"checkpoint was written for " + std::string(name) + " " + std::to_string(values.first) +
                   ", this model has " + std::to_string(values.second)};
  return Status::success();
}

}  // namespace troupe::checkpoint
