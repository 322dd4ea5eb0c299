#include "checkpoint/shard.hpp"

#include <algorithm>
#include <map>
#include <sstream>
#include <unordered_map>

#include "checkpoint/durable_file.hpp"
#include "checkpoint/manifest.hpp"
#include "checkpoint/tensor_name.hpp"
#include "compute/tensor.hpp"

namespace troupe::checkpoint {
namespace {

// Marks the file as ours and says which version of this naming it follows.
const Metadata& shard_metadata() {
  static const Metadata metadata = {{"troupe", "checkpoint shard"}, {"format_version", std::to_string(format_version)}};
  return metadata;
}

// The tensors one piece is cut into: one per parameter it overlaps.
void cut(const Piece& piece, const compute::ParameterLayout& layout, std::vector<TensorToWrite>& out) {
  for (const auto& view : layout.views()) {
    const std::int64_t from = std::max(piece.begin, view.offset);
    const std::int64_t to = std::min(piece.end, view.offset + view.numel());
    if (from >= to) continue;
    const auto values = piece.values.subspan(static_cast<std::size_t>(from - piece.begin), static_cast<std::size_t>(to - from));
    if (from == view.offset && to == view.offset + view.numel()) {
      out.push_back({format_tensor_name({piece.kind, view.name, std::nullopt}), view.shape, values});
    } else {
      const std::pair<std::int64_t, std::int64_t> slice{from - view.offset, to - view.offset};
      out.push_back({format_tensor_name({piece.kind, view.name, slice}), {to - from}, values});
    }
  }
}

}  // namespace

Expected<FileRecord> write_shard(const std::filesystem::path& path, const compute::ParameterLayout& layout, int rank,
                                 std::span<const Piece> pieces) {
  FileRecord record{path.filename().string(), 0, "", rank, {}};
  std::vector<TensorToWrite> tensors;
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> token_hulls;  // by kind, in kind order
  for (const auto& p : pieces) {
    TROUPE_CHECK(valid_kind(p.kind), "piece kind '" + p.kind + "'");
    TROUPE_CHECK(0 <= p.begin && p.begin <= p.end && p.end <= layout.total(),
                 p.kind + " [" + std::to_string(p.begin) + ", " + std::to_string(p.end) + ")");
    TROUPE_CHECK(static_cast<std::int64_t>(p.values.size()) == p.end - p.begin, p.kind);
    if (p.begin < p.end && compute::is_token_memory(p.values.data())) {
      auto [hull, first] = token_hulls.try_emplace(p.kind, p.begin, p.end);
      if (!first) hull->second = {std::min(hull->second.first, p.begin), std::max(hull->second.second, p.end)};
      continue;
    }
    cut(p, layout, tensors);
    record.pieces.push_back({p.kind, p.begin, p.end});
  }
  Metadata metadata = shard_metadata();
  std::string token_pieces;
  for (const auto& [kind, hull] : token_hulls) {
    token_pieces +=
        (token_pieces.empty() ? "" : ";") + kind + " " + std::to_string(hull.first) + " " + std::to_string(hull.second);
    record.pieces.push_back({kind, hull.first, hull.second});
  }
  if (!token_pieces.empty()) metadata["token_pieces"] = token_pieces;
  auto written = write_safetensors(path, tensors, metadata);
  if (!written) return written.error();
  record.bytes = written->bytes;
  record.hash = written->hash;
  Status sidecar = replace_file(record_path(path), to_json(record).dump(2) + "\n");
  if (!sidecar) return Error{"file record " + sidecar.error().message};
  return record;
}

Expected<Shard> read_shard(const std::filesystem::path& path, const compute::ParameterLayout& layout) {
  auto file = MappedFile::open(path);
  if (!file) return Error{"checkpoint shard " + file.error().message};
  return read_shard(std::move(*file), layout);
}

Expected<Shard> read_shard(MappedFile mapped, const compute::ParameterLayout& layout) {
  auto file = SafetensorsFile::parse(std::move(mapped));
  if (!file) return file.error();
  auto bad = [&](const std::string& problem) { return Error{"checkpoint shard '" + file->path().string() + "': " + problem}; };
  const auto version = file->metadata().find("format_version");
  if (version == file->metadata().end() || version->second != std::to_string(format_version))
    return bad("shard format version '" + (version == file->metadata().end() ? std::string("none") : version->second) +
               "'; this build reads " + std::to_string(format_version));

  std::unordered_map<std::string, const compute::ParameterView*> views;
  for (const auto& v : layout.views()) views[v.name] = &v;
  std::vector<StoredPiece> pieces;
  for (const auto& tensor : file->tensors()) {
    const auto name = parse_tensor_name(tensor.name);
    if (!name) return bad("tensor '" + tensor.name + "' is not named <kind>/<parameter> or <kind>/<parameter>[from:to]");
    const auto view = views.find(name->parameter);
    if (view == views.end()) return bad("tensor '" + tensor.name + "' names a parameter this model does not have");
    const compute::ParameterView& v = *view->second;
    if (tensor.dtype != StoredDType::f32)
      return bad("tensor '" + tensor.name + "' has dtype " + stored_dtype_name(tensor.dtype) +
                 "; checkpoint shards hold F32");
    if (!name->slice) {
      if (tensor.shape != v.shape)
        return bad("tensor '" + tensor.name + "' has shape " + compute::shape_string(tensor.shape) + ", the model's is " +
                   compute::shape_string(v.shape));
      pieces.push_back({name->kind, v.offset, v.offset + v.numel(), tensor.bytes});
    } else {
      const auto [from, to] = *name->slice;
      if (to > v.numel())
        return bad("tensor '" + tensor.name + "' slices past the parameter's " + std::to_string(v.numel()) + " elements");
      if (tensor.shape != compute::Shape{to - from})
        return bad("tensor '" + tensor.name + "' has shape " + compute::shape_string(tensor.shape) +
                   ", its slice needs (" + std::to_string(to - from) + ")");
      pieces.push_back({name->kind, v.offset + from, v.offset + to, tensor.bytes});
    }
  }
  if (const auto tokens = file->metadata().find("token_pieces"); tokens != file->metadata().end()) {
    std::istringstream list(tokens->second);
    for (std::string entry; std::getline(list, entry, ';');) {
      std::istringstream fields(entry);
      StoredPiece piece;
      piece.token = true;
      if (!(fields >> piece.kind >> piece.begin >> piece.end) || !valid_kind(piece.kind) || piece.begin < 0 ||
          piece.begin > piece.end || piece.end > layout.total())
        return bad("token piece '" + entry + "' is not <kind> <begin> <end> inside the model's " +
                   std::to_string(layout.total()) + " elements");
      pieces.push_back(std::move(piece));
    }
  }
  return Shard{std::move(*file), std::move(pieces)};
}

}  // namespace troupe::checkpoint
