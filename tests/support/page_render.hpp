#pragma once
// Headless Chromium drawing a job's web page (scripts/bench/page_render_time.py), for the tests
// that draw a 1,024-rank page: whether Debian's chromium is here (a test that cannot run says
// SKIPPED by name), the script's lines, and what every such test holds of them.

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/run_process.hpp"

namespace troupe::test {

inline const std::string chromium_path = "/usr/bin/chromium";

// Whether Chromium is installed; when not, says SKIPPED and why.
inline bool chromium_present() {
  if (std::filesystem::exists(chromium_path)) return true;
  std::printf("SKIPPED (needs Debian's chromium: apt-get install chromium): %s not found\n", chromium_path.c_str());
  WARN("SKIPPED (needs Debian's chromium: apt-get install chromium): " << chromium_path << " not found");
  return false;
}

// The script's lines for the page at `url` (its token included), with the grid's `>` pressed
// `turns` times: the first drawing, then one line a page turned.
inline std::vector<nlohmann::json> page_render_lines(const std::string& url, int turns) {
  const ProcessResult run =
      run_process({"/usr/bin/env", "python3", TROUPE_SOURCE_DIR "/scripts/bench/page_render_time.py", chromium_path,
                   url, std::to_string(turns)},
                  "/tmp", std::chrono::seconds(120));
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  std::vector<nlohmann::json> lines;
  std::istringstream out(run.out);
  for (std::string line; std::getline(out, line);) lines.push_back(nlohmann::json::parse(line));
  REQUIRE(lines.size() == static_cast<std::size_t>(turns) + 1);
  return lines;
}

// A 1,024-rank page's lines (three pages turned): the data drawn — from the page asking for its
// first /data to the tiles, curves, timeline and memory built and laid out — within 1 s of asking,
// 256 tiles a page on four pages, each turn showing the next 256 ranks. Before the asking, the
// browser's own navigation (starting a renderer, fetching the page) is printed but not held to the
// second: on a loaded machine it is mostly the browser's start.
inline void check_1024_rank_page(const std::vector<nlohmann::json>& lines, const std::string& what) {
  REQUIRE(lines.size() == 4);
  const nlohmann::json& first = lines[0];
  const double asked = first["data_asked_ms"].get<double>(), drawn = first["first_render_ms"].get<double>();
  std::printf(
      "%s: /data asked %.1f ms after the navigation began (page received %.1f ms), drawn %.1f ms later (the JSON "
      "back after %.1f ms; drawing and layout %.1f ms); %.1f ms from the navigation's start; pages turned in %.0f, "
      "%.0f and %.0f ms\n",
      what.c_str(), asked, first["page_received_ms"].get<double>(), drawn - asked,
      first["data_received_ms"].get<double>() - asked, first["render_ms"].get<double>(), drawn,
      lines[1]["turn_ms"].get<double>(), lines[2]["turn_ms"].get<double>(), lines[3]["turn_ms"].get<double>());
  CHECK(first["render_ms"].get<double>() > 0);  // a wall clock: virtual time would give 0
  CHECK(drawn > asked);
  CHECK(drawn - asked < 1000);
  CHECK(first["tiles"] == 256);
  CHECK(first["pages"] == 4);
  CHECK(first["first_rank"] == 0);
  for (int turn = 1; turn <= 3; ++turn) {
    CHECK(lines[turn]["page"] == turn + 1);
    CHECK(lines[turn]["tiles"] == 256);
    CHECK(lines[turn]["first_rank"] == 256 * turn);
  }
}

}  // namespace troupe::test
