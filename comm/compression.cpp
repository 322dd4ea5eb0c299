#include "comm/compression.hpp"

namespace troupe::comm {

std::string_view compression_name(Compression kind) {
  switch (kind) {
    case Compression::none: return "none";
    case Compression::bf16: return "bf16";
    case Compression::powersgd: return "powersgd";
  }
  TROUPE_CHECK(false, "an unknown compression");
}

}  // namespace troupe::comm
