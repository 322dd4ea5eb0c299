#pragma once
// What the checkpoint tests share: flat buffers whose every element is distinct (so a value in
// the wrong place shows), and committing a checkpoint written by several ranks the way training
// will: each rank writes its shard, the coordinator collects the sidecar records and commits.

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/manifest.hpp"
#include "checkpoint/shard.hpp"
#include "checkpoint/store.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::checkpoint::test {

inline compute::GPTConfig tiny_model() { return *compute::gpt_preset("tiny"); }

// Element i is i + salt: exact in float32 for every model here (under 2^22 elements).
inline std::vector<float> distinct_values(std::int64_t count, float salt) {
  std::vector<float> v(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) + salt;
  return v;
}

// Piece [begin, end) of `kind` taken from a whole flat buffer.
inline Piece piece_of(const std::string& kind, const std::vector<float>& flat, std::int64_t begin, std::int64_t end) {
  return {kind, begin, end, std::span<const float>(flat).subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin))};
}

inline Manifest manifest_for(const compute::GPTConfig& model, std::int64_t step) {
  Manifest m;
  m.model = model;
  m.step = step;
  m.optimizer_steps = step;
  m.job_config = {{"model", "tiny"}, {"lr", 0.001}};
  m.grid = {2, 1, 1};
  m.data = {1337, static_cast<std::uint64_t>(step) * 8, std::nullopt};
  m.rng = {42, {static_cast<std::uint64_t>(step), 7}};
  return m;
}

// Writes one shard per rank into the staging folder, then commits them.
inline void commit_checkpoint(const CheckpointStore& store, const compute::GPTConfig& model, std::int64_t step,
                              const std::vector<std::vector<Piece>>& ranks) {
  REQUIRE(store.begin(step).ok());
  const compute::ParameterLayout layout(model);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    auto record = write_shard(staging_dir(store.dir(), step) / shard_file_name(static_cast<int>(r)), layout,
                              static_cast<int>(r), ranks[r]);
    REQUIRE(record.ok());
  }
  auto records = store.collect_records(step);
  REQUIRE(records.ok());
  REQUIRE(records->size() == ranks.size());
  Manifest manifest = manifest_for(model, step);
  manifest.files = *records;
  const Status committed = store.commit(step, manifest);
  INFO((committed ? std::string() : committed.error().message));
  REQUIRE(committed.ok());
}

// A whole model's params, both moments, saved by one rank.
inline void commit_whole_model(const CheckpointStore& store, std::int64_t step, float salt) {
  const compute::GPTConfig model = tiny_model();
  const std::int64_t total = compute::ParameterLayout(model).total();
  const auto params = distinct_values(total, salt);
  commit_checkpoint(store, model, step, {{piece_of("param", params, 0, total)}});
}

inline std::vector<std::uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(bytes.data()),
                                                                 static_cast<std::streamsize>(bytes.size()));
}

}  // namespace troupe::checkpoint::test
