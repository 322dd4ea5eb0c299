// Line cutting: complete lines are emitted straight from the input when nothing is pending, so the
// common case copies nothing. A full piece is cut only when more bytes follow that are not its
// newline, so a line of exactly max_line bytes stays one line.

#include "apps/launch/line_buffer.hpp"

#include <algorithm>

namespace troupe::launch {

void LineBuffer::append(std::string_view bytes, const Emit& emit) {
  while (!bytes.empty()) {
    if (partial_.size() == max_line_) {
      emit(partial_);
      partial_.clear();
      if (bytes.front() == '\n') bytes.remove_prefix(1);
      continue;
    }
    const std::size_t newline = bytes.find('\n');
    const std::size_t room = max_line_ - partial_.size();
    if (newline == std::string_view::npos || newline > room) {
      const std::size_t take = std::min(bytes.size(), room);
      partial_.append(bytes.substr(0, take));
      bytes.remove_prefix(take);
    } else if (partial_.empty()) {
      emit(bytes.substr(0, newline));
      bytes.remove_prefix(newline + 1);
    } else {
      partial_.append(bytes.substr(0, newline));
      emit(partial_);
      partial_.clear();
      bytes.remove_prefix(newline + 1);
    }
  }
}

void LineBuffer::finish(const Emit& emit) {
  if (partial_.empty()) return;
  emit(partial_);
  partial_.clear();
}

}  // namespace troupe::launch
