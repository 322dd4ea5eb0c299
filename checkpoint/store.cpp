#include "checkpoint/store.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "checkpoint/durable_file.hpp"
#include "checkpoint/file_hash.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view step_prefix = "step-";
constexpr std::string_view staging_suffix = ".tmp";
constexpr std::string_view rescue_staging_suffix = ".rescue.tmp";
constexpr std::string_view sidecar_suffix = ".record.json";
constexpr std::string_view failure_suffix = ".failed";

// The step of a folder named step-NNNNNNN (digits only), else nothing.
std::optional<std::int64_t> parse_step(std::string_view name) {
  if (!name.starts_with(step_prefix)) return std::nullopt;
  const std::string_view digits = name.substr(step_prefix.size());
  std::int64_t step = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || step < 0) return std::nullopt;
  return step;
}

Error commit_error(std::int64_t step, Staging staging, const std::string& problem) {
  return Error{"checkpoint " + staging_dir({}, step, staging).string() + ": " + problem};
}

// Every kind the files hold must cover [0, total): a checkpoint with a hole cannot be loaded, so
// it must not be published.
Status check_coverage(std::int64_t step, Staging staging, const std::vector<FileRecord>& files, std::int64_t total) {
  std::map<std::string, std::vector<std::pair<std::int64_t, std::int64_t>>> by_kind;
  for (const auto& f : files)
    for (const auto& p : f.pieces) by_kind[p.kind].emplace_back(p.begin, p.end);
  for (auto& [kind, ranges] : by_kind) {
    std::sort(ranges.begin(), ranges.end());
    std::int64_t covered = 0;
    for (const auto& [begin, end] : ranges) {
      if (begin > covered) break;
      covered = std::max(covered, end);
    }
    if (covered < total) {
      std::int64_t gap_end = total;
      for (const auto& [begin, end] : ranges)
        if (begin > covered) gap_end = std::min(gap_end, begin);
      return commit_error(step, staging, "no file holds " + kind + " elements [" + std::to_string(covered) + ", " +
                                    std::to_string(gap_end) + ") of the " + std::to_string(total));
    }
  }
  return Status::success();
}

}  // namespace

std::string step_folder_name(std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%07lld", static_cast<long long>(step));
  return name;
}

std::string shard_file_name(int rank) {
  char name[48];
  std::snprintf(name, sizeof name, "rank-%05d.safetensors", rank);
  return name;
}

fs::path step_dir(const fs::path& dir, std::int64_t step) { return dir / step_folder_name(step); }

fs::path staging_dir(const fs::path& dir, std::int64_t step, Staging staging) {
  return dir / (step_folder_name(step) + std::string(staging == Staging::save ? staging_suffix : rescue_staging_suffix));
}

Expected<std::vector<std::int64_t>> committed_steps(const fs::path& dir) {
  std::vector<std::int64_t> steps;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return steps;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto step = parse_step(it->path().filename().string());
    std::error_code not_a_folder;
    if (step && it->is_directory(not_a_folder)) steps.push_back(*step);
  }
  if (ec) return Error{"checkpoint directory '" + dir.string() + "': cannot list: " + ec.message()};
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

CheckpointStore::CheckpointStore(fs::path dir, int keep_last) : dir_(std::move(dir)), keep_last_(keep_last) {
  TROUPE_CHECK(keep_last >= 1, "keep_last " + std::to_string(keep_last));
}

Status CheckpointStore::clear_staging() const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return Error{"checkpoint directory '" + dir_.string() + "': cannot create: " + ec.message()};
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().ends_with(staging_suffix)) stale.push_back(it->path());
  if (ec) return Error{"checkpoint directory '" + dir_.string() + "': cannot list: " + ec.message()};
  for (const fs::path& folder : stale) {
    fs::remove_all(folder, ec);
    if (ec) return Error{"checkpoint '" + folder.string() + "': cannot remove the stale folder: " + ec.message()};
  }
  return Status::success();
}

Expected<fs::path> CheckpointStore::begin(std::int64_t step, Staging which) const {
  const fs::path staging = staging_dir(dir_, step, which);
  std::error_code ec;
  fs::create_directories(staging, ec);
  if (ec) return Error{"checkpoint '" + staging.string() + "': cannot create: " + ec.message()};
  return staging;
}

Expected<std::vector<FileRecord>> CheckpointStore::collect_records(std::int64_t step, Staging which) const {
  const fs::path staging = staging_dir(dir_, step, which);
  std::vector<FileRecord> records;
  std::error_code ec;
  for (fs::directory_iterator it(staging, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->path().filename().string().ends_with(sidecar_suffix)) continue;
    auto record = read_record(it->path());
    if (!record) return record.error();
    records.push_back(std::move(*record));
  }
  if (ec) return Error{"checkpoint '" + staging.string() + "': cannot list: " + ec.message()};
  std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  return records;
}

void CheckpointStore::mark_failed(std::int64_t step, int rank, const std::string& error, Staging which) const {
  char name[48];
  std::snprintf(name, sizeof name, "rank-%05d%s", rank, failure_suffix.data());
  // Created first, then filled: a full disk still has room for the name.
  std::ofstream mark(staging_dir(dir_, step, which) / name);
  mark << error << '\n';
}

std::vector<std::string> CheckpointStore::failed_writers(std::int64_t step, Staging which) const {
  std::vector<std::string> failures;
  std::error_code ec;
  for (fs::directory_iterator it(staging_dir(dir_, step, which), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    int rank = 0;
    if (!name.ends_with(failure_suffix) || std::sscanf(name.c_str(), "rank-%d", &rank) != 1) continue;
    std::ifstream mark(it->path());
    std::string error;
    std::getline(mark, error);
    failures.push_back("rank " + std::to_string(rank) + ": " + (error.empty() ? "(no reason recorded: see its log)" : error));
  }
  std::sort(failures.begin(), failures.end());
  return failures;
}

std::vector<std::int64_t> CheckpointStore::rescue_steps_written() const {
  std::vector<std::int64_t> steps;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (!name.ends_with(rescue_staging_suffix)) continue;
    const auto step = parse_step(name.substr(0, name.size() - rescue_staging_suffix.size()));
    if (!step) continue;
    std::error_code listing;
    for (fs::directory_iterator file(it->path(), listing), done; !listing && file != done; file.increment(listing))
      if (file->path().filename().string().ends_with(sidecar_suffix)) {
        steps.push_back(*step);
        break;
      }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

Status CheckpointStore::commit(std::int64_t step, Manifest manifest, Staging which) const {
  if (manifest.step != step)
    return commit_error(step, which, "the manifest is for step " + std::to_string(manifest.step));
  if (Status valid = compute::validate(manifest.model); !valid)
    return commit_error(step, which, "the manifest's model: " + valid.error().message);
  if (manifest.files.empty()) return commit_error(step, which, "the manifest lists no files");
  const fs::path staging = staging_dir(dir_, step, which);
  std::error_code not_there;
  if (!fs::is_directory(staging, not_there)) return commit_error(step, which, "the staging folder does not exist (begin() not called?)");
  std::set<std::string> names;
  for (const auto& f : manifest.files) {
    if (!names.insert(f.name).second) return commit_error(step, which, "the manifest lists " + f.name + " twice");
    std::error_code ec;
    const auto size = fs::file_size(staging / f.name, ec);
    if (ec) return commit_error(step, which, f.name + " (rank " + std::to_string(f.rank) + ") is missing: " + ec.message());
    if (size != f.bytes)
      return commit_error(step, which, f.name + " has " + std::to_string(size) + " bytes, its record says " +
                                    std::to_string(f.bytes));
  }
  if (Status covered = check_coverage(step, which, manifest.files, compute::ParameterLayout(manifest.model).total()); !covered)
    return covered;

  // Shards from other processes were synced by their writers; syncing again costs nothing and
  // does not depend on it. Sidecars are superseded by the manifest.
  for (const auto& f : manifest.files)
    if (Status synced = fsync_path(staging / f.name); !synced) return commit_error(step, which, synced.error().message);
  std::vector<fs::path> sidecars;
  std::error_code ec;
  for (fs::directory_iterator it(staging, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().ends_with(sidecar_suffix)) sidecars.push_back(it->path());
  for (std::size_t i = 0; i < sidecars.size() && !ec; ++i) fs::remove(sidecars[i], ec);
  if (ec) return commit_error(step, which, "cannot remove the file records: " + ec.message());
  manifest.hash_algorithm = hash_algorithm;
  if (Status written = replace_file(staging / "manifest.json", to_json(manifest).dump(2) + "\n"); !written)
    return commit_error(step, which, "manifest " + written.error().message);

  // The folder appears under its final name complete or not at all.
  const fs::path final_dir = step_dir(dir_, step);
  fs::remove_all(final_dir, ec);  // an earlier timeline's checkpoint of the same step
  if (!ec) fs::rename(staging, final_dir, ec);
  if (ec) return commit_error(step, which, "cannot rename into " + final_dir.string() + ": " + ec.message());
  if (Status synced = fsync_path(dir_); !synced) return commit_error(step, which, synced.error().message);
  if (Status latest = replace_file(dir_ / "latest", step_folder_name(step) + "\n"); !latest)
    return commit_error(step, which, "latest " + latest.error().message);
  return prune(step);
}

Status CheckpointStore::prune(std::int64_t committed) const {
  auto steps = committed_steps(dir_);
  if (!steps) return steps.error();
  std::vector<fs::path> doomed;
  int others_kept = 0;
  for (std::int64_t step : *steps) {
    if (step == committed || ++others_kept < keep_last_) continue;
    doomed.push_back(step_dir(dir_, step));
  }
  // Staging folders of earlier steps are attempts that died; later ones may still be in progress.
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.ends_with(staging_suffix)) continue;
    const auto step = parse_step(name.substr(0, name.size() - staging_suffix.size()));
    if (step && *step < committed) doomed.push_back(it->path());
  }
  if (ec) return Error{"checkpoint directory '" + dir_.string() + "': cannot list: " + ec.message()};
  for (const auto& path : doomed) {
    fs::remove_all(path, ec);
    if (ec) return Error{"checkpoint '" + path.string() + "': cannot remove: " + ec.message()};
  }
  return Status::success();
}

}  // namespace troupe::checkpoint
