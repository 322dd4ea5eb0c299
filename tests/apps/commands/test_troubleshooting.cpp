// docs/troubleshooting.md indexes every error message the sources can produce, and only those.
//
// The rule that turns sources into message templates (documented in docs/troubleshooting.md):
// in apps/, actors/, comm/, compute/, checkpoint/, monitor/ and schedules/ (.cpp, .hpp, .cu;
// comments ignored), every `Error{ ... }` construction and every message of `error_exit(code,
// message)` that holds a string literal, and in apps/config/resolve.cpp every `return "..." ...;`
// problem, is split at its top-level `+`
// operators; each part that is string literals only gives their text, any other part gives `…`
// (consecutive ones merged). `Error{"--out " + path + ": cannot write"}` is `--out …: cannot write`.
// A part that is `fmt::format("...", …)` gives its first argument's text with each `{…}` as `…`.
// Beyond these, message_files() names per file the calls whose argument, the variables whose
// assigned or appended values, and the functions whose returns are messages (launch's lines, the
// job supervisor's and restart policy's reports, the monitor's answers to the shell); such a
// message gives one template per branch of a top-level `c ? a : b`, trimmed of spaces at either
// end, and none when it holds no letter or digit.
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

// `expr` cut at its top-level `sep` characters (strings and brackets skipped).
std::vector<std::string> split_top(const std::string& expr, char sep) {
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
    } else if (c == sep && depth == 0 && !(sep == ':' && ((i > 0 && expr[i - 1] == ':') || (i + 1 < expr.size() && expr[i + 1] == ':')))) {
      parts.push_back(expr.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(expr.substr(start));
  return parts;
}

// The template of an expression (see the rule above); empty when it holds no string literal.
std::string template_of(const std::string& expr) {
  const std::vector<std::string> parts = split_top(expr, '+');
  const std::regex literals("^\\s*(\"(\\\\.|[^\"\\\\])*\"\\s*)+$");
  const std::regex literal("\"((\\\\.|[^\"\\\\])*)\"");
  std::string result;
  bool any_literal = false;
  const std::regex format_call("^\\s*fmt::format\\s*\\(");
  for (std::string part : parts) {
    bool format = false;
    if (std::smatch m; std::regex_search(part, m, format_call)) {
      const std::size_t from = static_cast<std::size_t>(m.length(0));
      const std::string first = expression(part, from, ',');
      part = first.empty() ? expression(part, from, ')') : first;
      format = true;
    }
    if (std::regex_match(part, literals)) {
      any_literal = true;
      for (std::sregex_iterator it(part.begin(), part.end(), literal), end; it != end; ++it) {
        std::string raw = (*it)[1].str();
        if (format) raw = std::regex_replace(raw, std::regex("\\{[^{}]*\\}"), "…");
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


// The templates of a message that may be `condition ? a : b` at its top level: one per branch,
// trimmed of spaces at either end, and none that holds no letter or digit (`… …`).
std::vector<std::string> message_templates(const std::string& expr) {
  const std::vector<std::string> asked = split_top(expr, '?');
  if (asked.size() < 2) {
    std::string t = template_of(expr);
    t.erase(0, t.find_first_not_of(" \n"));
    t.erase(t.find_last_not_of(" \n") + 1);
    const bool has_word = std::any_of(t.begin(), t.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); });
    return has_word ? std::vector<std::string>{t} : std::vector<std::string>{};
  }
  std::vector<std::string> result;
  const std::string rest = expr.substr(asked[0].size() + 1);
  const std::vector<std::string> branches = split_top(rest, ':');
  const std::string then_branch = branches[0];
  for (const std::string& branch : {then_branch, rest.substr(std::min(rest.size(), then_branch.size() + 1))})
    for (std::string& t : message_templates(branch)) result.push_back(std::move(t));
  return result;
}

// Where, beyond Error{...} and error_exit(), a file's messages are: the argument `arg` (0-based)
// of each call of `name` (only when argument `when_false` is `false`, if one is named), each
// value given to (`=`) or appended to (`+=`) one of `variables`, each `return` value in the
// body of one of `functions`, and each string literal in the initializer of one of `tables`.
struct MessageCall {
  const char* name;
  int arg;
  int when_false = -1;
};
struct MessageFile {
  const char* path;
  std::vector<MessageCall> calls;
  std::vector<std::string> variables;
  std::vector<std::string> functions;
  std::vector<std::string> tables;
};

const std::vector<MessageFile>& message_files() {
  static const std::vector<MessageFile> files{
      {"apps/launch/node_launcher.cpp",
       {{"say", 0}, {"begin_stop", 1}, {"kill_remaining", 0}},
       {"why"},
       {},
       {"signal_ends"}},
      {"apps/commands/shell/shell_command.cpp", {}, {}, {"trace_write_failure"}},
      {"apps/launch/exit_status.cpp", {}, {}, {"describe"}},
      {"apps/commands/export_command.cpp", {{"CLI::ValidationError", 0}}, {}, {}},
      {"actors/supervision/job_supervisor.cpp",
       {{"fail_job", 2}, {"failure_outcome", 2}, {"end_rescue", 1}, {"check_rescue_writers", 2}},
       {"reason", "pending_failure", "verdict"},
       {"join_refusal"}},
      {"actors/supervision/recovery_coordinator.cpp",
       {{"fail_job", 2}, {"fail_in_place", 1}, {"restart_instead", 2}},
       {"reason"},
       {}},
      {"actors/supervision/supervisor_reports.cpp", {}, {"verdict"}, {"watchdog_verdict", "silence"}},
      {"actors/supervision/job_runner.cpp", {}, {"why_not"}, {}},
      {"actors/supervision/restart_policy.cpp", {{"warn", 0}, {"error", 0}}, {"reason"}, {}},
      {"actors/control/monitor_actor.cpp",
       {{"reply", 2, 1}, {"answer", 1, 0}, {"done", 0}, {"answered", 0}},
       {"why"},
       {}},
  };
  return files;
}

bool starts_name(const std::string& text, std::size_t at) {
  return at == 0 || !(std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_');
}

void insert_all(std::set<std::string>& into, const std::string& expr) {
  for (std::string& t : message_templates(expr)) into.insert(std::move(t));
}

// The templates the table above names in one file's text (comments removed).
std::set<std::string> file_message_templates(const MessageFile& file, const std::string& text) {
  std::set<std::string> templates;
  for (const MessageCall& call : file.calls) {
    const std::string open = std::string(call.name) + "(";
    for (std::size_t at = text.find(open); at != std::string::npos; at = text.find(open, at + 1)) {
      if (!starts_name(text, at)) continue;
      const std::vector<std::string> args = split_top(expression(text, at + open.size(), ')'), ',');
      if (static_cast<int>(args.size()) <= call.arg) continue;
      if (call.when_false >= 0 && std::regex_replace(args[call.when_false], std::regex("\\s"), "") != "false") continue;
      insert_all(templates, args[call.arg]);
    }
  }
  for (const std::string& variable : file.variables) {
    const std::regex assigned("(^|[^A-Za-z0-9_])" + variable + "\\s*(\\+=|=(?!=))");
    for (std::sregex_iterator it(text.begin(), text.end(), assigned), end; it != end; ++it)
      insert_all(templates, expression(text, static_cast<std::size_t>(it->position(0) + it->length(0)), ';'));
  }
  for (const std::string& function : file.functions) {
    const std::regex defined("(^|[^A-Za-z0-9_.>])" + function + "\\(");
    for (std::sregex_iterator it(text.begin(), text.end(), defined), end; it != end; ++it) {
      const std::size_t params = static_cast<std::size_t>(it->position(0) + it->length(0));
      std::size_t body = params + expression(text, params, ')').size() + 1;
      while (body < text.size() && std::isspace(static_cast<unsigned char>(text[body]))) ++body;
      while (body < text.size() && std::isalpha(static_cast<unsigned char>(text[body]))) {  // const, noexcept
        while (body < text.size() && !std::isspace(static_cast<unsigned char>(text[body])) && text[body] != '{') ++body;
        while (body < text.size() && std::isspace(static_cast<unsigned char>(text[body]))) ++body;
      }
      if (body >= text.size() || text[body] != '{') continue;  // a call or a declaration
      const std::string inside = expression(text, body + 1, '}');
      const std::regex ret("(^|[^A-Za-z0-9_])return\\s");
      for (std::sregex_iterator r(inside.begin(), inside.end(), ret), rend; r != rend; ++r)
        insert_all(templates, expression(inside, static_cast<std::size_t>(r->position(0) + r->length(0)), ';'));
    }
  }
  for (const std::string& table : file.tables) {
    const std::regex initialized("(^|[^A-Za-z0-9_])" + table + "\\s*\\[\\s*\\]\\s*=\\s*\\{");
    std::smatch m;
    const bool found = std::regex_search(text, m, initialized);
    INFO(file.path << ": the table " << table << "[] = {...} the rule reads");
    CHECK(found);
    if (!found) continue;
    const std::string entries = expression(text, static_cast<std::size_t>(m.position(0) + m.length(0)), '}');
    const std::regex literal("\"(\\\\.|[^\"\\\\])*\"");
    for (std::sregex_iterator it(entries.begin(), entries.end(), literal), end; it != end; ++it)
      insert_all(templates, it->str());
  }
  return templates;
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
      for (const MessageFile& file : message_files())
        if (entry.path() == root / file.path) templates.merge(file_message_templates(file, text));
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
  CHECK(template_of("fmt::format(\"kill node: node {} runs on {}\", i, h)") == "kill node: node … runs on …");
  CHECK(template_of("\"x \" + fmt::format(\"{:.1f} s\", d) + y") == "x … s…");
  CHECK(message_templates("a.empty() ? \"refused: no token\" : \"refused: \" + b") ==
        std::vector<std::string>{"refused: no token", "refused: …"});
  CHECK(message_templates("\" (limit \" + t + \"): \"") == std::vector<std::string>{"(limit …):"});
  CHECK(message_templates("a + \" \" + std::to_string(n)").empty());
  const MessageFile file{"f.cpp", {{"reply", 2, 1}, {"say", 0}}, {"why"}, {"refusal"}};
  const std::string text =
      "void say(const std::string& t) { sink(t); }\n"
      "std::string refusal(int x) const { if (x) return \"bad \" + s(x); return {}; }\n"
      "void f() { say(\"a \" + b); reply(st, false, \"no \" + c); reply(st, true, \"fine\");\n"
      "  std::string why = \"w\"; why += \"; more\"; if (why == \"z\") refusal(1); }\n";
  CHECK(file_message_templates(file, text) == std::set<std::string>{"a …", "no …", "bad …", "w", "; more"});
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
