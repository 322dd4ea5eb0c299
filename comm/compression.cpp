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

Expected<Compression> parse_compression(std::string_view name) {
  for (Compression kind : {Compression::none, Compression::bf16, Compression::powersgd}) {
    if (name == compression_name(kind)) return kind;
  }
  // Named first: GCC 12 warns (-Wrestrict, falsely) on "'" + a temporary string.
  const std::string given(name);
  return Error{"'" + given + "' is not a compression (known: none, bf16, powersgd)"};
}

}  // namespace troupe::comm
