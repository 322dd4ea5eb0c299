// The byte-level BPE tokenizer against the `tokenizers` library: the fixture of
// scripts/reference/hf_gpt2_fixture.py (tests/compute/golden/hf_gpt2, docs/formats/hf-fixture.md)
// holds a tokenizer.json the library trained and the ids it gives for every line of a text with
// accents, CJK, emoji, white-space runs, rare Unicode classes and <|endoftext|> inside lines.

#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compute/data/bpe_tokenizer.hpp"
#include "compute/data/gpt2_pretokenizer.hpp"
#include "compute/data/unicode_class.hpp"

using namespace troupe::compute;

namespace {

const std::string kFixture = TROUPE_SOURCE_DIR "/tests/compute/golden/hf_gpt2";

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const BpeTokenizer& fixture_tokenizer() {
  static const BpeTokenizer tokenizer = [] {
    auto t = BpeTokenizer::load(kFixture + "/model/tokenizer.json");
    if (!t) FAIL(t.error().message);
    return std::move(*t);
  }();
  return tokenizer;
}

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string_view> out;
  gpt2_pretokenize(text, out);
  return {out.begin(), out.end()};
}

std::string parse_error(const nlohmann::json& tokenizer) {
  auto t = BpeTokenizer::parse(tokenizer.dump(), "t.json");
  REQUIRE_FALSE(t.ok());
  const std::string prefix = "tokenizer.json 't.json': ";
  REQUIRE(t.error().message.substr(0, prefix.size()) == prefix);
  return t.error().message.substr(prefix.size());
}

}  // namespace

TEST_CASE("code points are letters, numbers, white space or other, as Unicode says", "[data][tokenizer]") {
  CHECK(code_point_class(U'a') == CodePointClass::letter);
  CHECK(code_point_class(U'\u01C5') == CodePointClass::letter);  // Lt
  CHECK(code_point_class(U'\u65E5') == CodePointClass::letter);  // CJK
  CHECK(code_point_class(U'7') == CodePointClass::number);
  CHECK(code_point_class(U'\u216B') == CodePointClass::number);  // Nl
  CHECK(code_point_class(U'\u00BD') == CodePointClass::number);  // No
  CHECK(code_point_class(U'\u0663') == CodePointClass::number);  // Arabic-Indic digit
  CHECK(code_point_class(U'\u3000') == CodePointClass::space);
  CHECK(code_point_class(U'\u0085') == CodePointClass::space);
  CHECK(code_point_class(U'\u200B') == CodePointClass::other);  // zero width space: not White_Space
  CHECK(code_point_class(U'\u0301') == CodePointClass::other);  // a combining mark
  CHECK(code_point_class(U'\U0001F44D') == CodePointClass::other);
}

TEST_CASE("GPT-2's pre-tokenizer cuts as its pattern does", "[data][tokenizer]") {
  using V = std::vector<std::string>;
  CHECK(pieces("Hello world") == V{"Hello", " world"});
  CHECK(pieces("a   b") == V{"a", "  ", " b"});        // the run gives its last space to the word
  CHECK(pieces("a\t\tb") == V{"a", "\t", "\t", "b"});  // a tab does not join the word
  CHECK(pieces("end   ") == V{"end", "   "});          // a run at the end stays whole
  CHECK(pieces("don't DON'T") == V{"don", "'t", " DON", "'", "T"});
  CHECK(pieces("we'll they're") == V{"we", "'ll", " they", "'re"});
  CHECK(pieces("x 123abc!!") == V{"x", " 123", "abc", "!!"});
  CHECK(pieces(" ?'s") == V{" ?'", "s"});
  CHECK(pieces("caf\xC3\xA9 \xF0\x9F\x91\x8D") == V{"caf\xC3\xA9", " \xF0\x9F\x91\x8D"});
  CHECK(pieces("") == V{});
}

TEST_CASE("the tokenizer gives the library's ids for every line of the fixture text, and decodes them back",
          "[data][tokenizer][golden]") {
  const BpeTokenizer& tokenizer = fixture_tokenizer();
  const nlohmann::json reference = nlohmann::json::parse(read(kFixture + "/reference.json"));
  CHECK(tokenizer.vocab_size() == reference["vocab_size"].get<int>());
  CHECK(tokenizer.added_token("<|endoftext|>") == 0);
  const std::string text = read(kFixture + "/text.txt");
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  REQUIRE(lines.size() == reference["line_ids"].size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    INFO("line " << i << ": " << nlohmann::json(lines[i]).dump());
    const std::vector<std::int32_t> ids = tokenizer.encode(lines[i]);
    CHECK(ids == reference["line_ids"][i].get<std::vector<std::int32_t>>());
    auto decoded = tokenizer.decode(ids);
    REQUIRE(decoded.ok());
    CHECK(*decoded == lines[i]);
  }
  const std::vector<std::int32_t> all = tokenizer.encode(text);
  CHECK(all == reference["text_ids"].get<std::vector<std::int32_t>>());
  CHECK(tokenizer.decode(all).value() == text);
  const std::int32_t outside[] = {7, tokenizer.vocab_size()};
  CHECK(tokenizer.decode(outside).error().message == "token id 500 is not in the vocabulary");
}

TEST_CASE("merges written as \"a b\" strings give the same ids as [a, b] pairs", "[data][tokenizer]") {
  nlohmann::json json = nlohmann::json::parse(read(kFixture + "/model/tokenizer.json"));
  REQUIRE(json["model"]["merges"][0].is_array());
  for (auto& merge : json["model"]["merges"]) merge = merge[0].get<std::string>() + " " + merge[1].get<std::string>();
  auto strings = BpeTokenizer::parse(json.dump(), "strings.json");
  REQUIRE(strings.ok());
  const std::string text = read(kFixture + "/text.txt");
  CHECK(strings->encode(text) == fixture_tokenizer().encode(text));
}

TEST_CASE("tokenizers Troupe does not run are refused by name", "[data][tokenizer]") {
  const nlohmann::json good = nlohmann::json::parse(read(kFixture + "/model/tokenizer.json"));
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json changed = good;
    edit(changed);
    return changed;
  };
  CHECK(parse_error(with([](auto& j) { j["model"]["type"] = "WordPiece"; })) ==
        "model.type \"WordPiece\" is not read; only byte-level BPE is");
  CHECK(parse_error(with([](auto& j) { j["model"]["type"] = "Unigram"; })) ==
        "model.type \"Unigram\" is not read; only byte-level BPE is");
  CHECK(parse_error(with([](auto& j) {
          j["normalizer"] = {{"type", "NFC"}};
        })) == "normalizer \"NFC\" is not read; byte-level BPE has none");
  CHECK(parse_error(with([](auto& j) {
          j["pre_tokenizer"] = {{"type", "Whitespace"}};
        })) == "pre_tokenizer \"Whitespace\" is not read; only ByteLevel is");
  CHECK(parse_error(with([](auto& j) { j["pre_tokenizer"]["add_prefix_space"] = true; })) ==
        "pre_tokenizer.add_prefix_space true is not read");
  CHECK(parse_error(with([](auto& j) { j["model"]["merges"][0] = "x"; })) == "model.merges[0] \"x\" is not two tokens");
  CHECK(parse_error(with([](auto& j) { j["model"]["vocab"].erase("A"); })) ==
        "model.vocab has no token for byte 65 (byte-level BPE needs all 256)");
  CHECK(BpeTokenizer::load(kFixture + "/absent.json").error().message ==
        "tokenizer.json '" + kFixture + "/absent.json': cannot be read");
}
