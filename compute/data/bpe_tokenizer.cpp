#include "compute/data/bpe_tokenizer.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "compute/data/gpt2_pretokenizer.hpp"
#include "compute/data/utf8.hpp"

namespace troupe::compute {
namespace {

using nlohmann::json;

// GPT-2's bytes_to_unicode: the code point that stands for each byte in the vocabulary's strings.
struct ByteMap {
  char32_t to_char[256];
  std::unordered_map<char32_t, std::uint8_t> to_byte;

  ByteMap() {
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(next++);
      to_byte[to_char[b]] = static_cast<std::uint8_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

// A vocabulary string (byte-level code points, UTF-8) as the bytes it stands for; nullopt when a
// code point stands for no byte.
std::optional<std::string> token_to_bytes(const std::string& token) {
  const auto* data = reinterpret_cast<const std::uint8_t*>(token.data());
  const std::span<const std::uint8_t> bytes(data, token.size());
  std::string out;
  for (std::size_t pos = 0; pos < bytes.size();) {
    const Utf8Sequence s = utf8_sequence_at(bytes, pos);
    if (s.length == 0) return std::nullopt;
    const auto found = byte_map().to_byte.find(s.code_point);
    if (found == byte_map().to_byte.end()) return std::nullopt;
    out.push_back(static_cast<char>(found->second));
    pos += s.length;
  }
  return out;
}

std::string type_of(const json& object) {
  return object.is_object() && object.contains("type") ? object["type"].dump() : object.dump();
}

// The first thing `section` (a pre_tokenizer, decoder or post_processor) does that GPT-2's
// ByteLevel does not; empty when it is null or GPT-2's ByteLevel.
std::string byte_level_difference(const json& section, const char* name, bool allow_prefix_space) {
  if (section.is_null()) return "";
  if (!section.is_object() || section.value("type", "") != "ByteLevel")
    return std::string(name) + " " + type_of(section) + " is not read; only ByteLevel is";
  if (section.contains("use_regex") && section["use_regex"] != true)
    return std::string(name) + ".use_regex false is not read; only GPT-2's pattern is";
  if (!allow_prefix_space && section.contains("add_prefix_space") && section["add_prefix_space"] != false)
    return std::string(name) + ".add_prefix_space true is not read";
  return "";
}

}  // namespace

Expected<BpeTokenizer> BpeTokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"tokenizer.json '" + path + "': cannot be read"};
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

Expected<BpeTokenizer> BpeTokenizer::parse(std::string_view json_text, const std::string& path) {
  auto bad = [&](const std::string& problem) { return Error{"tokenizer.json '" + path + "': " + problem}; };
  const json root = json::parse(json_text, nullptr, false);
  if (root.is_discarded() || !root.is_object()) return bad("not a JSON object");
  if (!root.contains("model") || !root["model"].is_object()) return bad("no model object");
  const json& model = root["model"];
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") return bad("model.type \"" + type + "\" is not read; only byte-level BPE is");
  if (root.contains("normalizer") && !root["normalizer"].is_null())
    return bad("normalizer " + type_of(root["normalizer"]) + " is not read; byte-level BPE has none");
  // The post-processor and decoder may carry add_prefix_space: it only trims offsets there.
  for (const auto& [key, allow_prefix] :
       {std::pair{"pre_tokenizer", false}, {"decoder", true}, {"post_processor", true}})
    if (root.contains(key))
      if (std::string difference = byte_level_difference(root[key], key, allow_prefix); !difference.empty())
        return bad(difference);
  if (!root.contains("pre_tokenizer") || root["pre_tokenizer"].is_null())
    return bad("no pre_tokenizer; byte-level BPE needs ByteLevel");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix", "dropout"})
    if (model.contains(key) && !model[key].is_null()) return bad(std::string("model.") + key + " is not read");
  if (model.value("byte_fallback", false)) return bad("model.byte_fallback true is not read");
  if (!model.contains("vocab") || !model["vocab"].is_object()) return bad("no model.vocab object");
  if (!model.contains("merges") || !model["merges"].is_array()) return bad("no model.merges list");

  BpeTokenizer t;
  t.ignore_merges_ = model.value("ignore_merges", false);
  std::int32_t largest = -1;
  auto place = [&](std::int32_t id, std::string bytes) {
    if (static_cast<std::size_t>(id) >= t.token_bytes_.size()) t.token_bytes_.resize(static_cast<std::size_t>(id) + 1);
    t.token_bytes_[static_cast<std::size_t>(id)] = std::move(bytes);
    largest = std::max(largest, id);
  };
  std::unordered_map<std::string, std::int32_t> added_contents;
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    for (const json& added : root["added_tokens"]) {
      if (!added.is_object() || !added.contains("id") || !added["id"].is_number_unsigned() ||
          !added.contains("content") || !added["content"].is_string() || added["content"].get<std::string>().empty())
        return bad("added token " + added.dump() + " needs an id and a content");
      for (const char* flag : {"lstrip", "rstrip", "single_word"})
        if (added.value(flag, false))
          return bad("added token " + added["content"].dump() + " has " + flag + " true, not read");
      const auto id = added["id"].get<std::int64_t>();
      if (id > std::numeric_limits<std::int32_t>::max())
        return bad("added token id " + std::to_string(id) + " is too large");
      const std::string content = added["content"].get<std::string>();
      t.added_.emplace_back(content, static_cast<std::int32_t>(id));
      added_contents.emplace(content, static_cast<std::int32_t>(id));
      place(static_cast<std::int32_t>(id), content);
    }
  }
  std::sort(t.added_.begin(), t.added_.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });

  for (const auto& [token, id_json] : model["vocab"].items()) {
    if (!id_json.is_number_unsigned() || id_json.get<std::uint64_t>() > std::numeric_limits<std::int32_t>::max())
      return bad("model.vocab gives '" + token + "' the id " + id_json.dump());
    const auto id = id_json.get<std::int32_t>();
    if (added_contents.contains(token)) continue;  // its bytes are its content
    auto bytes = token_to_bytes(token);
    if (!bytes) return bad("model.vocab token '" + token + "' is not byte-level (a character stands for no byte)");
    t.vocab_.emplace(*bytes, id);
    place(id, std::move(*bytes));
  }
  for (int b = 0; b < 256; ++b) {
    const auto found = t.vocab_.find(std::string(1, static_cast<char>(b)));
    if (found == t.vocab_.end())
      return bad("model.vocab has no token for byte " + std::to_string(b) + " (byte-level BPE needs all 256)");
    t.byte_token_[b] = found->second;
  }

  const json& merges = model["merges"];
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    std::string left, right;
    if (m.is_string()) {
      const std::string text = m.get<std::string>();
      const auto space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
        return bad("model.merges[" + std::to_string(rank) + "] " + m.dump() + " is not two tokens");
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return bad("model.merges[" + std::to_string(rank) + "] " + m.dump() + " is not two tokens");
    }
    const auto a = token_to_bytes(left);
    const auto b = token_to_bytes(right);
    const auto ia = a ? t.vocab_.find(*a) : t.vocab_.end();
    const auto ib = b ? t.vocab_.find(*b) : t.vocab_.end();
    const auto merged = a && b ? t.vocab_.find(*a + *b) : t.vocab_.end();
    if (ia == t.vocab_.end() || ib == t.vocab_.end() || merged == t.vocab_.end())
      return bad("model.merges[" + std::to_string(rank) + "] " + m.dump() + " joins tokens the vocabulary lacks");
    t.merges_.emplace(pair_key(ia->second, ib->second), Merge{static_cast<std::uint32_t>(rank), merged->second});
  }
  if (largest < 0) return bad("the vocabulary is empty");
  return t;
}

std::int32_t BpeTokenizer::added_token(std::string_view content) const {
  for (const auto& [text, id] : added_)
    if (text == content) return id;
  return -1;
}

bool BpeTokenizer::added_tokens_hold_newline() const {
  return std::any_of(added_.begin(), added_.end(),
                     [](const auto& added) { return added.first.find('\n') != std::string::npos; });
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_)
    if (const auto whole = vocab_.find(std::string(piece)); whole != vocab_.end()) {
      out.push_back(whole->second);
      return;
    }
  std::vector<std::int32_t> symbols(piece.size());
  for (std::size_t i = 0; i < piece.size(); ++i) symbols[i] = byte_token_[static_cast<std::uint8_t>(piece[i])];
  while (symbols.size() > 1) {
    std::uint32_t best_rank = std::numeric_limits<std::uint32_t>::max();
    std::size_t best = 0;
    std::int32_t best_id = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto found = merges_.find(pair_key(symbols[i], symbols[i + 1]));
      if (found != merges_.end() && found->second.rank < best_rank) {
        best_rank = found->second.rank;
        best = i;
        best_id = found->second.id;
      }
    }
    if (best_rank == std::numeric_limits<std::uint32_t>::max()) break;
    symbols[best] = best_id;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void BpeTokenizer::encode(std::string_view text, std::vector<std::int32_t>& out) const {
  std::vector<std::string_view> pieces;
  while (!text.empty()) {
    // The earliest added token, the longest at that position.
    std::size_t at = text.size();
    const std::pair<std::string, std::int32_t>* found = nullptr;
    for (const auto& added : added_) {
      const std::size_t pos = text.substr(0, std::min(text.size(), at + added.first.size())).find(added.first);
      if (pos < at) {
        at = pos;
        found = &added;
      }
    }
    pieces.clear();
    gpt2_pretokenize(text.substr(0, at), pieces);
    for (std::string_view piece : pieces) encode_piece(piece, out);
    if (found == nullptr) break;
    out.push_back(found->second);
    text.remove_prefix(at + found->first.size());
  }
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  encode(text, ids);
  return ids;
}

const std::string& BpeTokenizer::token_bytes(std::int32_t id) const {
  static const std::string none;
  return id >= 0 && static_cast<std::size_t>(id) < token_bytes_.size() ? token_bytes_[static_cast<std::size_t>(id)]
                                                                       : none;
}

Expected<std::string> BpeTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  for (std::int32_t id : ids) {
    const std::string& bytes = token_bytes(id);
    if (bytes.empty()) return Error{"token id " + std::to_string(id) + " is not in the vocabulary"};
    out += bytes;
  }
  return out;
}

}  // namespace troupe::compute
