#include "checkpoint/file_record.hpp"

#include <fstream>
#include <sstream>

#include "checkpoint/json_fields.hpp"

namespace troupe::checkpoint {

bool valid_kind(std::string_view kind) {
  if (kind.empty()) return false;
  for (char c : kind)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

nlohmann::json to_json(const FileRecord& r) {
  nlohmann::json pieces = nlohmann::json::array();
  for (const auto& p : r.pieces) pieces.push_back({{"kind", p.kind}, {"begin", p.begin}, {"end", p.end}});
  return {{"name", r.name}, {"bytes", r.bytes}, {"hash", r.hash}, {"rank", r.rank}, {"pieces", pieces}};
}

Expected<FileRecord> file_record_from_json(const nlohmann::json& json, const std::string& where) {
  JsonFields f(json, where);
  FileRecord r;
  r.name = f.string("name");
  if (!f.error() && (r.name.empty() || r.name == "." || r.name == ".." || r.name.find('/') != std::string::npos))
    f.fail("name", "must be a plain file name, got '" + r.name + "'");
  r.bytes = f.unsigned_integer("bytes");
  r.hash = f.string("hash");
  r.rank = static_cast<int>(f.integer("rank"));
  const nlohmann::json& pieces = f.array("pieces");
  for (std::size_t i = 0; !f.error() && i < pieces.size(); ++i) {
    JsonFields p(pieces[i], f.where("pieces." + std::to_string(i) + "."));
    PieceRange range{p.string("kind"), p.integer("begin"), p.integer("end")};
    if (!p.error() && !valid_kind(range.kind)) p.fail("kind", "must be letters a-z and '_', got '" + range.kind + "'");
    if (!p.error() && (range.begin < 0 || range.end < range.begin))
      p.fail("end", "must not be below begin (" + std::to_string(range.begin) + "), got " + std::to_string(range.end));
    if (p.error()) return *p.error();
    r.pieces.push_back(std::move(range));
  }
  if (f.error()) return *f.error();
  return r;
}

std::filesystem::path record_path(const std::filesystem::path& shard) {
  std::filesystem::path sidecar = shard;
  sidecar += ".record.json";
  return sidecar;
}

Expected<FileRecord> read_record(const std::filesystem::path& sidecar) {
  std::ifstream in(sidecar);
  if (!in) return Error{"file record '" + sidecar.string() + "': cannot open"};
  std::stringstream text;
  text << in.rdbuf();
  const auto json = nlohmann::json::parse(text.str(), nullptr, false);
  if (json.is_discarded()) return Error{"file record '" + sidecar.string() + "': not valid JSON"};
  auto record = file_record_from_json(json);
  if (!record) return Error{"file record '" + sidecar.string() + "': " + record.error().message};
  return record;
}

}  // namespace troupe::checkpoint
