#pragma once
// Reading the shell's command lines through libedit (BSD licence; GNU readline is GPL): line
// editing, history kept across sessions in ~/.troupe/shell_history, and tab completion of the
// command words.

#include <optional>
#include <string>
#include <vector>

namespace troupe::apps::shell {

class LineEditor {
 public:
  // `words` are completed at the start of a line (and after "kill" / "drain", their objects).
  explicit LineEditor(std::vector<std::string> words);
  ~LineEditor();
  LineEditor(const LineEditor&) = delete;
  LineEditor& operator=(const LineEditor&) = delete;

  // The next line without its newline; nullopt at end of input (Ctrl-D).
  std::optional<std::string> read(const std::string& prompt);

 private:
  std::string history_file_;
};

}  // namespace troupe::apps::shell
