// Text corpus: directory walk order, which files are taken, symlink dedup, the errors, and the
// real default corpus (Debian fortunes).

#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "compute/data/text_corpus.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::compute;
using troupe::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string as_text(const std::vector<std::uint16_t>& tokens) { return {tokens.begin(), tokens.end()}; }

std::string reason_for(const TextCorpus& corpus, const fs::path& path) {
  for (const auto& s : corpus.skipped)
    if (s.path == path.string()) return s.reason;
  return "(not skipped)";
}

std::string corpus_error(const std::string& path, std::size_t min_tokens = 1) {
  auto corpus = scan_text_corpus(path, min_tokens);
  REQUIRE_FALSE(corpus.ok());
  return corpus.error().message;
}

}  // namespace

TEST_CASE("text corpus walks a directory in byte-wise path order and takes only text", "[data]") {
  TempDir dir;
  const fs::path root = dir.path();
  dir.write("b.txt", "bbb\n");
  dir.write("a/z.txt", "az\n");
  dir.write("a-c.txt", "ac\n");  // "a-c.txt" < "a/z.txt" byte-wise: '-' (0x2D) < '/' (0x2F)
  dir.write("a/index.dat", "text, but a fortune index by name\n");
  dir.write("bin.txt", std::string("ab\0cd", 5));
  dir.write("latin1.txt", "caf\xE9\n");
  dir.write("utf8.txt", "h\xC3\xA9llo");
  fs::create_symlink(root / "b.txt", root / "b.txt.u8");
  fs::create_directory_symlink(root / "a", root / "link-to-a");
  fs::create_directory_symlink(root, root / "a" / "loop");  // a cycle back to the root
  fs::create_symlink(root / "nowhere", root / "broken");

  auto corpus = scan_text_corpus(root.string());
  REQUIRE(corpus.ok());
  CHECK(as_text(corpus->tokens) == "ac\naz\nbbb\nh\xC3\xA9llo");
  CHECK(corpus->files == std::vector<std::string>{(root / "a-c.txt").string(), (root / "a/z.txt").string(),
                                                  (root / "b.txt").string(), (root / "utf8.txt").string()});
  CHECK_THAT(reason_for(*corpus, root / "a/index.dat"), Catch::Contains(".dat"));
  CHECK_THAT(reason_for(*corpus, root / "bin.txt"), Catch::Contains("NUL byte at offset 2"));
  CHECK_THAT(reason_for(*corpus, root / "latin1.txt"), Catch::Contains("not UTF-8") && Catch::Contains("offset 3"));
  CHECK(reason_for(*corpus, root / "b.txt.u8") == "duplicate of " + (root / "b.txt").string());
  CHECK(reason_for(*corpus, root / "link-to-a/z.txt") == "duplicate of " + (root / "a/z.txt").string());
  CHECK(reason_for(*corpus, root / "broken") == "broken symlink");
  CHECK(reason_for(*corpus, root / "a/loop") == "symlink loop back to " + fs::canonical(root).string());
  CHECK(reason_for(*corpus, root / "link-to-a/loop") == "symlink loop back to " + fs::canonical(root).string());

  auto tokens = load_text_corpus(root.string());
  REQUIRE(tokens.ok());
  CHECK(*tokens == corpus->tokens);
}

TEST_CASE("text corpus takes a named file as it is", "[data]") {
  TempDir dir;
  const std::string path = dir.write("one.txt", "\xE2\x82\xAC 5\n");
  auto tokens = load_text_corpus(path);
  REQUIRE(tokens.ok());
  CHECK(*tokens == std::vector<std::uint16_t>{0xE2, 0x82, 0xAC, ' ', '5', '\n'});
}

TEST_CASE("text corpus errors name the path and the problem", "[data]") {
  TempDir dir;
  SECTION("missing path") {
    const std::string path = (dir.path() / "missing").string();
    CHECK_THAT(corpus_error(path), Catch::Contains(path) && Catch::Contains("does not exist"));
  }
  SECTION("empty directory") {
    CHECK_THAT(corpus_error(dir.path().string()),
               Catch::Contains(dir.path().string()) && Catch::Contains("no text files"));
  }
  SECTION("directory of index and binary files only") {
    dir.write("x.dat", "index");
    dir.write("y", std::string("\0\1\2", 3));
    CHECK_THAT(corpus_error(dir.path().string()),
               Catch::Contains("no text files") && Catch::Contains("2 files skipped"));
  }
  SECTION("only empty text files") {
    dir.write("empty.txt", "");
    CHECK_THAT(corpus_error(dir.path().string()), Catch::Contains(dir.path().string()) && Catch::Contains("is empty"));
  }
  SECTION("named binary file") {
    const std::string path = dir.write("blob", std::string("\x7F") + "ELF" + std::string(1, '\0'));
    CHECK_THAT(corpus_error(path),
               Catch::Contains(path) && Catch::Contains("not a text file") && Catch::Contains("NUL byte at offset 4"));
  }
  SECTION("too short for a training window") {
    const std::string path = dir.write("short.txt", std::string(100, 'a'));
    CHECK_THAT(corpus_error(path, 258), Catch::Contains(path) && Catch::Contains("too short") &&
                                            Catch::Contains("100 bytes") && Catch::Contains("at least 258"));
    CHECK(scan_text_corpus(path, 100).ok());
  }
}

TEST_CASE("text corpus refuses devices and pipes without reading them", "[data]") {
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);  // opening it would wait for a writer
  CHECK(corpus_error("/dev/zero") == "text corpus '/dev/zero': is a character device, not a regular file or a directory");
  CHECK(corpus_error(fifo) == "text corpus '" + fifo + "': is a FIFO (named pipe), not a regular file or a directory");
  dir.write("d/text.txt", "some text\n");
  REQUIRE(::mkfifo((dir.path() / "d" / "pipe").c_str(), 0600) == 0);
  auto walked = scan_text_corpus((dir.path() / "d").string());
  REQUIRE(walked.ok());
  CHECK(reason_for(*walked, dir.path() / "d" / "pipe") == "not a regular file");
}

TEST_CASE("text corpus reads at most its byte limit, all files together", "[data]") {
  TempDir dir;
  const std::string big = dir.write("big.txt", std::string(2000, 'a'));
  CHECK(scan_text_corpus(big, 1, 2000).ok());
  CHECK_THAT(scan_text_corpus(big, 1, 1999).error().message,
             Catch::Contains(big) && Catch::Contains("more than 1999 bytes of text, all files together"));
  dir.write("d/a.txt", std::string(600, 'a'));
  const std::string second = dir.write("d/b.txt", std::string(600, 'b'));
  CHECK(scan_text_corpus((dir.path() / "d").string(), 1, 1200).ok());
  CHECK_THAT(scan_text_corpus((dir.path() / "d").string(), 1, 1000).error().message,
             Catch::Contains(second) && Catch::Contains("more than 1000 bytes"));
  CHECK(max_text_corpus_bytes == std::size_t{1} << 30);
}

TEST_CASE("the default corpus, Debian fortunes, loads", "[data]") {
  const std::string path = "/usr/share/games/fortunes";
  if (!fs::is_directory(path))
    FAIL(path
         << " is missing: the default corpus comes from the Debian package 'fortunes'; run scripts/install-deps.sh");
  auto corpus = scan_text_corpus(path);
  REQUIRE(corpus.ok());
  CHECK(corpus->tokens.size() > 1'000'000);
  CHECK(corpus->files.size() > 20);
  CHECK(std::is_sorted(corpus->files.begin(), corpus->files.end()));
  for (const std::string& f : corpus->files) {
    CHECK_FALSE(fs::path(f).extension() == ".dat");
    CHECK_FALSE(fs::path(f).extension() == ".u8");
  }
  for (const auto& s : corpus->skipped) {
    if (fs::path(s.path).extension() == ".u8") CHECK_THAT(s.reason, Catch::StartsWith("duplicate of "));
  }
}
