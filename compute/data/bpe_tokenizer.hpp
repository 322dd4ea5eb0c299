#pragma once
// A Hugging Face tokenizer.json of the byte-level BPE kind (GPT-2's and its family's), read and run
// here so that text becomes the ids the `tokenizers` library gives, and ids become text again.
//
// Encoding, as the library does it: the text is split at the added tokens (`added_tokens`, such
// as <|endoftext|>, matched exactly, the longest at the earliest position first), which become
// their ids; every other stretch is cut by GPT-2's pre-tokenizer (gpt2_pretokenizer.hpp); each
// piece's bytes start as the vocabulary's one-byte tokens (the byte-to-unicode map of GPT-2 names
// them: printable Latin-1 bytes stand for themselves, the others for U+0100 onwards) and the
// merges are applied lowest rank first, leftmost first among equals, until none applies.
// Decoding concatenates the tokens' bytes (an added token's content for an added token).
//
// What is read, and what is refused naming it: model.type "BPE" (WordPiece, Unigram, WordLevel are
// refused by name), model.vocab and model.merges (as "a b" strings or as [a, b] pairs),
// model.ignore_merges, no normalizer, a ByteLevel pre-tokenizer with GPT-2's pattern
// (use_regex true, add_prefix_space false), a ByteLevel or no decoder and post-processor, and
// added tokens without lstrip, rstrip or single_word.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compute/expected.hpp"

namespace troupe::compute {

class BpeTokenizer {
 public:
  // Errors name the file and the field: "tokenizer.json 'tok.json': model.type \"WordPiece\" is
  // not read; only byte-level BPE is".
  static Expected<BpeTokenizer> load(const std::string& path);
  static Expected<BpeTokenizer> parse(std::string_view json_text, const std::string& path);

  // One more than the largest id.
  int vocab_size() const { return static_cast<int>(token_bytes_.size()); }
  // The id of an added token by its content ("<|endoftext|>"), or -1.
  std::int32_t added_token(std::string_view content) const;
  // Whether some added token's content holds a '\n' (parallel_encode.hpp cuts text at newlines).
  bool added_tokens_hold_newline() const;

  // The ids of one pre-tokenizer piece (no added token inside), appended to `out`.
  void encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const;
  // The ids of `text`, appended to `out`.
  void encode(std::string_view text, std::vector<std::int32_t>& out) const;
  std::vector<std::int32_t> encode(std::string_view text) const;

  // The bytes the ids stand for; an id outside the vocabulary is an error naming it.
  Expected<std::string> decode(std::span<const std::int32_t> ids) const;
  // The bytes of one id (empty for an id no token has).
  const std::string& token_bytes(std::int32_t id) const;

 private:
  struct Merge {
    std::uint32_t rank;
    std::int32_t id;  // the merged token
  };
  static std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
    return (std::uint64_t{static_cast<std::uint32_t>(a)} << 32) | static_cast<std::uint32_t>(b);
  }

  std::unordered_map<std::string, std::int32_t> vocab_;  // by the token's bytes
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::vector<std::string> token_bytes_;  // by id
  std::int32_t byte_token_[256] = {};
  std::vector<std::pair<std::string, std::int32_t>> added_;  // content, id; longest first
  bool ignore_merges_ = false;
};

}  // namespace troupe::compute
