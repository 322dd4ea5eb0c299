#pragma once
// GPT-2's pre-tokenizer: the text cut into the pieces byte-pair merges stay inside, by the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// written out by hand over code points (unicode_class.hpp), as a regex engine would run it:
// alternatives tried in order at each position, each greedy. Its effects: a word takes the one
// space before it (" world"), a run of white space gives its last space to the word after it,
// contractions are pieces of their own (lower case only, as in GPT-2), and letters, digits and
// other symbols never share a piece. Invalid UTF-8 bytes are symbols of one byte each.

#include <string_view>
#include <vector>

namespace troupe::compute {

// Appends the pieces of `text` to `out`, in order; together they are `text`.
void gpt2_pretokenize(std::string_view text, std::vector<std::string_view>& out);

}  // namespace troupe::compute
