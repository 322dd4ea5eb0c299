#pragma once
// Cuts a byte stream into whole lines, so output forwarded from many children never interleaves
// partial lines: bytes wait here until their newline arrives. A line longer than max_line is cut
// into max_line pieces, so one child cannot make the launcher hold unbounded memory.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace troupe::launch {

class LineBuffer {
 public:
  using Emit = std::function<void(std::string_view line)>;

  explicit LineBuffer(std::size_t max_line) : max_line_(max_line) {}

  // Adds bytes; emits every line they complete, without its '\n'.
  void append(std::string_view bytes, const Emit& emit);
  // Emits what is left after the last newline, if anything: the stream has ended.
  void finish(const Emit& emit);

 private:
  std::size_t max_line_;
  std::string partial_;
};

}  // namespace troupe::launch
