#include "compute/data/file_kind.hpp"

#include <filesystem>

namespace troupe::compute {

std::optional<std::string> special_file_problem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_type type = fs::status(path, ec).type();
  if (ec) return std::nullopt;
  const char* kind = nullptr;
  switch (type) {
    case fs::file_type::character: kind = "a character device"; break;
    case fs::file_type::block: kind = "a block device"; break;
    case fs::file_type::fifo: kind = "a FIFO (named pipe)"; break;
    case fs::file_type::socket: kind = "a socket"; break;
    case fs::file_type::unknown: kind = "of an unknown kind"; break;
    default: return std::nullopt;
  }
  return std::string("is ") + kind + ", not a regular file";
}

}  // namespace troupe::compute
