#include "compute/data/text_corpus.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <span>
#include <utility>

#include "compute/data/file_kind.hpp"
#include "compute/data/utf8.hpp"

namespace troupe::compute {
namespace fs = std::filesystem;
namespace {

Error corpus_error(const std::string& path, const std::string& problem) {
  return Error{"text corpus '" + path + "': " + problem};
}

// Collects every path below `dir` that is not a directory. `ancestors` holds the canonical paths
// of the directories on the way down: a symlink back to one of them would loop and is not
// followed. Other directories reached twice are walked twice — their files are deduplicated
// later — so what is collected does not depend on the order the file system lists entries in.
Status collect_files(const fs::path& dir, std::vector<fs::path>& ancestors, std::vector<fs::path>& files,
                     std::vector<SkippedFile>& skipped) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(dir, ec);
  if (ec) return corpus_error(dir.string(), "cannot resolve the directory: " + ec.message());
  if (std::find(ancestors.begin(), ancestors.end(), canonical) != ancestors.end()) {
    skipped.push_back({dir.string(), "symlink loop back to " + canonical.string()});
    return Status::success();
  }
  ancestors.push_back(canonical);
  fs::directory_iterator it(dir, ec);
  if (ec) return corpus_error(dir.string(), "cannot list the directory: " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path entry = it->path();
    std::error_code entry_ec;                 // an entry that cannot be examined is reported when it is read
    if (fs::is_directory(entry, entry_ec)) {  // follows symlinks
      if (Status s = collect_files(entry, ancestors, files, skipped); !s) return s;
    } else {
      files.push_back(entry);
    }
  }
  if (ec) return corpus_error(dir.string(), "cannot list the directory: " + ec.message());
  ancestors.pop_back();
  return Status::success();
}

// Reads in chunks and stops past `room` bytes, so a file that grows while it is read, or a
// /proc file whose size says nothing, cannot take all of memory.
Expected<std::string> read_file(const fs::path& path, std::size_t room, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return corpus_error(path.string(), std::string("cannot open: ") + std::strerror(errno));
  std::string bytes;
  std::vector<char> chunk(std::size_t{1} << 16);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    bytes.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
    if (bytes.size() > room)
      return corpus_error(path.string(), "more than " + std::to_string(max_bytes) +
                                             " bytes of text, all files together: the most a text corpus may hold; "
                                             "use a token file (data.train_tokens)");
  }
  if (in.bad()) return corpus_error(path.string(), "cannot read");
  return bytes;
}

// Empty when `bytes` are text, else why not.
std::string why_not_text(const std::string& bytes) {
  if (const void* nul = std::memchr(bytes.data(), 0, bytes.size()))
    return "binary (NUL byte at offset " + std::to_string(static_cast<const char*>(nul) - bytes.data()) + ")";
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  const std::size_t invalid = utf8_first_invalid(std::span(data, bytes.size()));
  if (invalid != bytes.size()) return "not UTF-8 (invalid byte at offset " + std::to_string(invalid) + ")";
  return {};
}

void append_tokens(const std::string& bytes, std::vector<std::uint16_t>& tokens) {
  // Grown geometrically: reserving the exact size file by file copied the corpus once per file.
  const std::size_t needed = tokens.size() + bytes.size();
  if (needed > tokens.capacity()) tokens.reserve(std::max(needed, 2 * tokens.capacity()));
  for (const char c : bytes) tokens.push_back(static_cast<std::uint8_t>(c));
}

Status scan_directory(const fs::path& root, std::size_t max_bytes, TextCorpus& corpus) {
  std::vector<fs::path> ancestors;
  std::vector<fs::path> paths;
  if (Status s = collect_files(root, ancestors, paths, corpus.skipped); !s) return s;
  std::sort(paths.begin(), paths.end(), [](const fs::path& a, const fs::path& b) { return a.native() < b.native(); });

  std::map<fs::path, std::string> taken;  // canonical path -> the path it was taken at
  for (const fs::path& path : paths) {
    const std::string name = path.string();
    std::error_code ec;
    if (path.extension() == ".dat") {
      corpus.skipped.push_back({name, "fortune index (.dat)"});
      continue;
    }
    const fs::file_status status = fs::status(path, ec);
    if (status.type() == fs::file_type::not_found) {
      corpus.skipped.push_back({name, "broken symlink"});
      continue;
    }
    if (ec) return corpus_error(name, "cannot access: " + ec.message());
    if (!fs::is_regular_file(status)) {
      corpus.skipped.push_back({name, "not a regular file"});
      continue;
    }
    const fs::path real = fs::canonical(path, ec);
    if (ec) return corpus_error(name, "cannot resolve the path: " + ec.message());
    if (const auto first = taken.find(real); first != taken.end()) {
      corpus.skipped.push_back({name, "duplicate of " + first->second});
      continue;
    }
    Expected<std::string> bytes = read_file(path, max_bytes - corpus.tokens.size(), max_bytes);
    if (!bytes) return bytes.error();
    if (std::string why = why_not_text(*bytes); !why.empty()) {
      corpus.skipped.push_back({name, why});
      continue;
    }
    append_tokens(*bytes, corpus.tokens);
    corpus.files.push_back(name);
    taken.emplace(real, name);
  }
  std::sort(corpus.skipped.begin(), corpus.skipped.end(),
            [](const SkippedFile& a, const SkippedFile& b) { return a.path < b.path; });
  if (corpus.files.empty())
    return corpus_error(root.string(), "no text files in the directory (" + std::to_string(corpus.skipped.size()) +
                                           " files skipped: index, binary, duplicate or special files)");
  return Status::success();
}

}  // namespace

Expected<TextCorpus> scan_text_corpus(const std::string& path, std::size_t min_tokens, std::size_t max_bytes) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) return corpus_error(path, "does not exist");
  if (ec) return corpus_error(path, "cannot access: " + ec.message());
  TextCorpus corpus;
  if (fs::is_directory(status)) {
    if (Status s = scan_directory(path, max_bytes, corpus); !s) return s.error();
  } else {
    if (auto special = special_file_problem(path)) return corpus_error(path, *special + " or a directory");
    Expected<std::string> bytes = read_file(path, max_bytes, max_bytes);
    if (!bytes) return bytes.error();
    if (std::string why = why_not_text(*bytes); !why.empty()) return corpus_error(path, "not a text file: " + why);
    append_tokens(*bytes, corpus.tokens);
    corpus.files.push_back(path);
  }
  if (corpus.tokens.empty()) return corpus_error(path, "is empty (0 bytes of text)");
  if (corpus.tokens.size() < min_tokens)
    return corpus_error(path, "too short: " + std::to_string(corpus.tokens.size()) + " bytes of text, at least " +
                                  std::to_string(min_tokens) +
                                  " are needed to make one training and one validation window");
  return corpus;
}

Expected<std::vector<std::uint16_t>> load_text_corpus(const std::string& path, std::size_t min_tokens) {
  Expected<TextCorpus> corpus = scan_text_corpus(path, min_tokens);
  if (!corpus) return corpus.error();
  return std::move(corpus->tokens);
}

}  // namespace troupe::compute
