// docs/troubleshooting.md indexes every error message the sources can produce, and only those.
//
// The rule that turns sources into message templates (documented in docs/troubleshooting.md):
// in apps/, actors/, comm/, compute/, checkpoint/, monitor/ and schedules/ (.cpp, .hpp, .cu;
// comments ignored), every `Error{ ... }` construction and every message of `error_exit(code,
// message)` that holds a string literal, and in apps/config/resolve.cpp every `return "..." ...;`
// problem, is split at its top-level `+`
// operators; each part that is string literals only gives their text, any other part gives `…`
// (consecutive ones merged). `Error{"--out " + path + ": cannot write"}` is `--out …: cannot write`.
// Each entry of the page is a table row whose first cell is one template as a code span.

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"

using namespace troupe::test;
namespace fs = std::filesystem;

namespace {

// The text with // and /* */ comments blanked out, string and character literals kept.
std::string without_comments(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '"' || s[i] == '\'') {
      const char quote = s[i];
      std::size_t j = i + 1;
      while (j < s.size() && s[j] != quote) j += s[j] == '\\' ? 2 : 1;
      out.append(s, i, j + 1 - i);
      i = j + 1;
    } else if (s.compare(i, 2, "//") == 0) {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (s.compare(i, 2, "/*") == 0) {
      const std::size_t end = s.find("*/", i + 2);
      i = end == std::string::npos ? s.size() : end + 2;
      out += ' ';
    } else {
      out += s[i++];
    }
  }
  return out;
}

// From `from`, the expression up to the first `stop` character at depth 0 (strings skipped).
std::string expression(const std::string& s, std::size_t from, char stop) {
  int depth = 0;
  for (std::size_t i = from; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"' || c == '\'') {
      std::size_t j = i + 1;
      while (j < s.size() && s[j] != c) j += s[j] == '\\' ? 2 : 1;
      i = j;
    } else if (depth == 0 && c == stop) {
      return s.substr(from, i - from);
    } else if (c == '(' || c == '{' || c == '[') {
      ++depth;
    } else if (c == ')' || c == '}' || c == ']') {
      --depth;
    }
  }
  return {};
}

// The template of an expression (see the rule above); empty when it holds no string literal.
std::string template_of(const std::string& expr) {
  std::vector<std::string> parts;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < expr.size(); ++i) {
    const char c = expr[i];
    if (c == '"' || c == '\'') {
      std::size_t j = i + 1;
      while (j < expr.size() && expr[j] != c) j += expr[j] == '\\' ? 2 : 1;
      i = j;
    } else if (c == '(' || c == '{' || c == '[') {
      ++depth;
    } else if (c == ')' || c == '}' || c == ']') {
      --depth;
    } else if (c == '+' && depth == 0) {
      parts.push_back(expr.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(expr.substr(start));
  const std::regex literals("^\\s*(\"(\\\\.|[^\"\\\\])*\"\\s*)+$");
  const std::regex literal("\"((\\\\.|[^\"\\\\])*)\"");
  std::string result;
  bool any_literal = false;
  for (const std::string& part : parts) {
    if (std::regex_match(part, literals)) {
      any_literal = true;
      for (std::sregex_iterator it(part.begin(), part.end(), literal), end; it != end; ++it) {
        const std::string raw = (*it)[1].str();
        for (std::size_t k = 0; k < raw.size(); ++k) {
          if (raw[k] == '\\' && k + 1 < raw.size()) {
            ++k;
            result += raw[k] == 'n' ? '\n' : raw[k] == 't' ? '\t' : raw[k];
          } else {
            result += raw[k];
          }
        }
      }
    } else if (result.size() < 3 || result.compare(result.size() - 3, 3, "…") != 0) {
      result += "…";
    }
  }
  return any_literal ? result : std::string{};
}

std::set<std::string> source_templates() {
  std::set<std::string> templates;
  const fs::path root = TROUPE_SOURCE_DIR;
  for (const char* folder : {"apps", "actors", "comm", "compute", "checkpoint", "monitor", "schedules"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".cu") continue;
      const std::string text = without_comments(file_text(entry.path()));
      for (std::size_t at = text.find("Error{"); at != std::string::npos; at = text.find("Error{", at + 6)) {
        if (at > 0 && (std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_')) continue;
        if (std::string t = template_of(expression(text, at + 6, '}')); !t.empty()) templates.insert(t);
      }
      for (std::size_t at = text.find("error_exit("); at != std::string::npos; at = text.find("error_exit(", at + 11)) {
        if (at > 0 && (std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_')) continue;
        const std::string code = expression(text, at + 11, ',');
        if (code.empty()) continue;  // the declaration, or a call with one argument
        if (std::string t = template_of(expression(text, at + 11 + code.size() + 1, ')')); !t.empty())
          templates.insert(t);
      }
      if (entry.path() == root / "apps/config/resolve.cpp") {
        const std::regex ret("return\\s+\"");
        for (std::sregex_iterator it(text.begin(), text.end(), ret), end; it != end; ++it) {
          const std::size_t from = static_cast<std::size_t>(it->position(0)) + 6;
          if (std::string t = template_of(expression(text, from, ';')); !t.empty()) templates.insert(t);
        }
      }
    }
  }
  return templates;
}

// The first cells of the page's table rows that are one code span: `x` or ``x``, \| for |.
std::set<std::string> page_templates(const std::string& page) {
  std::set<std::string> templates;
  const std::regex row("^\\| (``? ?)(.+?)( ?``?) \\|");
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row) || m[1].str().empty()) continue;
    std::string t = std::regex_replace(m[2].str(), std::regex("\\\\\\|"), "|");
    templates.insert(t);
  }
  return templates;
}

}  // namespace

TEST_CASE("the template rule: literals kept, other parts one …", "[troubleshooting]") {
  CHECK(template_of("\"--out \" + path + \": cannot write\"") == "--out …: cannot write");
  CHECK(template_of("where + \"needs at least 1 stage (p)\"") == "…needs at least 1 stage (p)");
  CHECK(template_of("\"a \" \"b\" + str(f(x + 1)) + g + \"c\"") == "a b…c");
  CHECK(template_of("e.message").empty());
}

TEST_CASE("docs/troubleshooting.md has an entry for every error template and none for errors that are gone",
          "[troubleshooting]") {
  const std::set<std::string> sources = source_templates();
  const std::set<std::string> page = page_templates(file_text(TROUPE_SOURCE_DIR "/docs/troubleshooting.md"));
  REQUIRE(sources.size() > 50);
  std::vector<std::string> missing, stale;
  std::set_difference(sources.begin(), sources.end(), page.begin(), page.end(), std::back_inserter(missing));
  std::set_difference(page.begin(), page.end(), sources.begin(), sources.end(), std::back_inserter(stale));
  std::string missing_text, stale_text;
  for (const auto& t : missing) missing_text += "| `" + t + "` |\n";
  for (const auto& t : stale) stale_text += "| `" + t + "` |\n";
  INFO("in the sources, no entry in docs/troubleshooting.md (" << missing.size() << "):\n" << missing_text);
  INFO("entries in docs/troubleshooting.md no source produces (" << stale.size() << "):\n" << stale_text);
  CHECK(missing.empty());
  CHECK(stale.empty());
}
