#pragma once
// Tokenizing a large text on several threads with the ids one thread gives. The text is cut into
// chunks at newlines where the cut cannot change the pre-tokenizer's pieces: after a '\n' that
// follows a non-space ASCII byte and comes before one, a piece ends in the whole text as it does at
// the end of a chunk ("\n" alone), and the next starts afresh. Merges never cross pieces, so the
// chunks' ids, joined in order, are the whole text's. A tokenizer whose added tokens hold a '\n'
// (which a cut could split) is run as one chunk.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "compute/data/bpe_tokenizer.hpp"

namespace troupe::compute {

// Chunks of about `target_bytes` (longer where no cut point comes sooner), covering `text` in order.
std::vector<std::string_view> cut_for_encoding(std::string_view text, std::size_t target_bytes,
                                               const BpeTokenizer& tokenizer);

// tokenizer.encode(text) on `threads` threads (at least 1). `progress`, if set, is called on the
// calling thread now and then with the bytes encoded so far, and once at the end with all of them.
std::vector<std::int32_t> encode_parallel(const BpeTokenizer& tokenizer, std::string_view text, int threads,
                                          std::size_t chunk_bytes = std::size_t{1} << 20,
                                          const std::function<void(std::size_t)>& progress = {});

}  // namespace troupe::compute
