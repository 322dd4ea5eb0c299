// docs/guide.md as a user follows it: every fenced block opened with ```sh tested runs, in the
// guide's order, in one bash (set -euo pipefail) in an empty folder that links configs/, with the
// built troupe first on PATH. A block opened with ```sh tested needs=TOOL runs only where TOOL is
// installed (the test warns which it skipped). Any failing command fails the test; stderr then
// ends after the marker of the block that failed (">>> docs/guide.md:LINE").

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"

using namespace troupe::test;
using Catch::Contains;

namespace {

struct Block {
  int line = 0;       // of the opening fence, from 1
  std::string needs;  // a program the block needs; empty = none
  std::string text;
};

std::vector<Block> tested_blocks(const std::string& markdown) {
  const std::regex open("^```sh tested( needs=([A-Za-z0-9_.-]+))?\\s*$");
  std::vector<Block> blocks;
  std::istringstream in(markdown);
  Block* current = nullptr;
  bool in_other_fence = false;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    std::smatch m;
    if (current) {
      if (line.rfind("```", 0) == 0) current = nullptr;
      else current->text += line + "\n";
    } else if (in_other_fence) {
      if (line.rfind("```", 0) == 0) in_other_fence = false;
    } else if (std::regex_match(line, m, open)) {
      blocks.push_back({number, m[2].str(), ""});
      current = &blocks.back();
    } else if (line.rfind("```", 0) == 0) {
      in_other_fence = true;
    }
  }
  REQUIRE(current == nullptr);  // every tested block is closed
  return blocks;
}

}  // namespace

TEST_CASE("every tested command of docs/guide.md runs", "[guide]") {
  const std::vector<Block> blocks = tested_blocks(file_text(TROUPE_SOURCE_DIR "/docs/guide.md"));
  REQUIRE(blocks.size() >= 10);

  TempDir dir;
  std::filesystem::create_directory_symlink(TROUPE_SOURCE_DIR "/configs", dir.path() / "configs");
  std::string script =
      "set -euo pipefail\n"
      "export PATH='" TROUPE_BINARY_DIR "':\"$PATH\" XDG_RUNTIME_DIR=\"$PWD\"\n"
      // A background job the guide started is stopped if a later block fails.
      "trap 'for p in $(jobs -p); do kill -INT $p 2>/dev/null; done; wait' EXIT\n";
  for (const Block& b : blocks) {
    const std::string marker = ">>> docs/guide.md:" + std::to_string(b.line);
    if (b.needs.empty()) {
      script += "echo '" + marker + "' >&2\n" + b.text;
    } else {
      script += "if command -v " + b.needs + " >/dev/null; then\necho '" + marker + "' >&2\n" + b.text +
                "else\necho '" + marker + " skipped: no " + b.needs + "' >&2\nfi\n";
    }
  }
  script += "echo '>>> the end' >&2\n";
  dir.write("guide.sh", script);

  // timeout(1) signals its whole process group, so a job left running is stopped too.
  const ProcessResult r = run_process({"/usr/bin/timeout", "-k", "10", "100", "/bin/bash", "guide.sh"}, dir.path().string(),
                                      std::chrono::seconds(120));
  const std::string tail = r.err.substr(r.err.size() > 6000 ? r.err.size() - 6000 : 0);
  INFO("stderr (tail):\n" << tail);
  INFO("stdout (tail):\n" << r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Contains(">>> the end"));
  for (const Block& b : blocks)
    if (!b.needs.empty() && r.err.find("docs/guide.md:" + std::to_string(b.line) + " skipped") != std::string::npos)
      WARN("docs/guide.md:" << b.line << " not run: " << b.needs << " is not installed");
}
