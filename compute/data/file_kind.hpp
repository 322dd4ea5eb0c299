#pragma once
// Data files are read to their end, so only regular files (and, for a text corpus, directories)
// are read at all: a device such as /dev/zero or a pipe may never end, and opening a FIFO waits
// for a writer. This names what a path is instead, for the loaders' one-line errors.

#include <optional>
#include <string>

namespace troupe::compute {

// Empty for a regular file (after symlinks), a directory, or a path that cannot be examined (the
// loader's own open reports that); otherwise what it is, e.g. "is a character device, not a
// regular file".
std::optional<std::string> special_file_problem(const std::string& path);

}  // namespace troupe::compute
