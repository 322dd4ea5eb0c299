#include "apps/commands/shell/line_editor.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <editline/readline.h>

namespace troupe::apps::shell {
namespace {

// libedit's completion callbacks are plain functions: the words live here, one editor at a time.
std::vector<std::string> completion_words;

char* next_match(const char* text, int state) {
  static std::size_t index;
  if (state == 0) index = 0;
  const std::size_t length = std::strlen(text);
  while (index < completion_words.size()) {
    const std::string& word = completion_words[index++];
    if (word.compare(0, length, text) == 0) return strdup(word.c_str());
  }
  return nullptr;
}

char** complete(const char* text, int, int) {
  rl_attempted_completion_over = 1;  // no file-name completion when no command matches
  return rl_completion_matches(text, next_match);
}

}  // namespace

LineEditor::LineEditor(std::vector<std::string> words) {
  completion_words = std::move(words);
  rl_readline_name = "troupe";
  rl_attempted_completion_function = complete;
  using_history();
  if (const char* home = std::getenv("HOME"); home && *home) {
    const std::string folder = std::string(home) + "/.troupe";
    ::mkdir(folder.c_str(), 0700);
    history_file_ = folder + "/shell_history";
    read_history(history_file_.c_str());
  }
}

LineEditor::~LineEditor() {
  if (!history_file_.empty()) write_history(history_file_.c_str());
}

std::optional<std::string> LineEditor::read(const std::string& prompt) {
  char* raw = readline(prompt.c_str());
  if (!raw) return std::nullopt;
  std::string line(raw);
  std::free(raw);
  if (line.find_first_not_of(" \t") != std::string::npos) add_history(line.c_str());
  return line;
}

}  // namespace troupe::apps::shell
