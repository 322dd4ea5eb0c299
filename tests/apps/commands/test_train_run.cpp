// troupe train as a user runs it: data problems found at start-up are rejected with one line and
// nothing written, and the 200-step learning run of small reaches its validation target.

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>

#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;
using Catch::StartsWith;

namespace {

ProcessResult troupe_train(const TempDir& dir, std::vector<std::string> args, std::chrono::seconds timeout) {
  args.insert(args.begin(), {TROUPE_BINARY_DIR "/troupe", "train"});
  return run_process(args, dir.path().string(), timeout);
}

void check_data_rejected(const TempDir& dir, const std::vector<std::string>& args, const std::string& what) {
  const auto files_before = std::distance(std::filesystem::directory_iterator(dir.path()), {});
  const ProcessResult r = troupe_train(dir, args, std::chrono::seconds(30));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("troupe: error:"));
  CHECK_THAT(r.err, Contains(what));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == files_before);
}

void write_bytes(const std::filesystem::path& path, const std::vector<std::int32_t>& header, std::size_t tokens,
                 std::uint16_t token = 7) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size() * 4));
  std::vector<std::uint16_t> body(tokens, token);
  out.write(reinterpret_cast<const char*>(body.data()), static_cast<std::streamsize>(body.size() * 2));
}

}  // namespace

TEST_CASE("train rejects missing, empty and malformed data with one line", "[cli][data]") {
  TempDir dir;
  check_data_rejected(dir, {"--data.corpus", (dir.path() / "nowhere").string()}, "nowhere");
  std::filesystem::create_directory(dir.path() / "empty");
  check_data_rejected(dir, {"--data.corpus", (dir.path() / "empty").string()}, "empty");
  dir.write("short.txt", "too short for a window");
  check_data_rejected(dir, {"--data.corpus", (dir.path() / "short.txt").string()}, "short.txt");

  std::vector<std::int32_t> header(256, 0);
  header[0] = 12345;
  header[1] = 1;
  header[2] = 5000;
  write_bytes(dir.path() / "magic.bin", header, 5000);
  check_data_rejected(dir, {"--data.train_tokens", (dir.path() / "magic.bin").string()}, "magic");
  header[0] = 20240520;
  write_bytes(dir.path() / "size.bin", header, 4000);
  check_data_rejected(dir, {"--data.train_tokens", (dir.path() / "size.bin").string()}, "size.bin");
  check_data_rejected(dir, {"--data.train_tokens", (dir.path() / "absent.bin").string()}, "absent.bin");
  header[2] = 5000;
  write_bytes(dir.path() / "vocab.bin", header, 5000, 300);
  check_data_rejected(dir, {"--data.train_tokens", (dir.path() / "vocab.bin").string()}, "300");
}

namespace {

// `config` trained for its 200 steps on the built-in corpus ends below validation loss 2.9 (from
// about 5.5, a byte vocabulary's uniform guess) and samples text.
void check_learns(const std::string& name, std::vector<std::string> args) {
  TempDir dir;
  args.insert(args.end(), {"--train.steps", "200", "--sample.tokens", "40"});
  const ProcessResult r = troupe_train(dir, args, std::chrono::seconds(1200));
  INFO("stdout tail: " << r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0));
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  std::smatch match;
  REQUIRE(std::regex_search(r.out, match, std::regex("final val loss ([0-9.]+)")));
  const double val = std::stod(match[1].str());
  std::printf("%s, 200 steps: final validation loss %.4f (target < 2.9)\n", name.c_str(), val);
  CHECK(val < 2.9);
  CHECK_THAT(r.out, Contains("sample ("));
}

}  // namespace

TEST_CASE("tiny trains on fortunes for 200 steps to validation loss below 2.9", "[learning]") {
  check_learns("tiny", {"--config", TROUPE_SOURCE_DIR "/configs/tiny.toml"});
}

TEST_CASE("small trains on fortunes for 200 steps to validation loss below 2.9", "[learning][slow]") {
  check_learns("small, batch 8", {"--config", TROUPE_SOURCE_DIR "/configs/small.toml", "--train.threads", "0"});
}
