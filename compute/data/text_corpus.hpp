#pragma once
// A text corpus as byte-level tokens (vocabulary 256): every byte of every text file becomes
// one token, files concatenated. The default corpus is Debian's fortunes
// (/usr/share/games/fortunes).
//
// A path is a file or a directory. A directory is walked recursively and its files are taken in
// byte-wise order of their path strings, so the token stream (and hence the data order) is the
// same on every machine whatever the file system returns. Symlinks are followed; a real file
// reached by several paths is taken once, at its first path in that order (Debian's fortunes
// has `x.u8 -> x`); a directory symlink back to a directory above it is not followed (no loops).
//
// Which files are text, by a rule simple enough to state in one line: a file is text when it
// holds no NUL byte and is valid UTF-8. Fortune index files (`*.dat`) are skipped by name —
// they are binary, but skipping them by name keeps that independent of their contents.
// A named file (not a directory) is only checked for being text.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "compute/expected.hpp"

namespace troupe::compute {

// The most bytes a text corpus may hold, all its files together: each byte becomes a 2-byte
// token in every worker's memory. Larger data belongs in token files.
inline constexpr std::size_t max_text_corpus_bytes = std::size_t{1} << 30;

struct SkippedFile {
  std::string path;
  std::string reason;  // e.g. "fortune index (.dat)", "duplicate of /usr/share/games/fortunes/art"
};

struct TextCorpus {
  std::vector<std::uint16_t> tokens;  // one token per byte
  std::vector<std::string> files;     // the files taken, in stream order
  std::vector<SkippedFile> skipped;   // what a directory walk left out, and why; sorted by path
};

// Errors (one line naming the path): the path does not exist or cannot be read, a named path is
// a device, pipe or socket, a named file is not text, the corpus holds more than
// max_text_corpus_bytes, a directory holds no text file, or the corpus has fewer than `min_tokens` tokens
// (pass min_tokens_for_split(T + 1, val_fraction) from split.hpp to guarantee one window of
// T + 1 tokens in both the training and the validation part).
// `max_bytes` is what it reads at most, all files together.
Expected<TextCorpus> scan_text_corpus(const std::string& path, std::size_t min_tokens = 1,
                                      std::size_t max_bytes = max_text_corpus_bytes);

// The tokens of scan_text_corpus alone.
Expected<std::vector<std::uint16_t>> load_text_corpus(const std::string& path, std::size_t min_tokens = 1);

}  // namespace troupe::compute
