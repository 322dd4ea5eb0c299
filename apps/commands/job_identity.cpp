#include "apps/commands/job_identity.hpp"

#include <xxhash.h>

#include <cstdio>
#include <fstream>

#include "apps/config/print.hpp"

namespace troupe::apps {

std::string build_id() { return TROUPE_BUILD_ID; }

std::uint64_t config_hash(const JobConfig& config) {
  const std::string text = config_to_toml(config);
  return XXH64(text.data(), text.size(), 0);
}

Expected<std::string> new_job_token() {
  std::ifstream random("/dev/urandom", std::ios::binary);
  unsigned char bytes[16];
  if (!random.read(reinterpret_cast<char*>(bytes), sizeof bytes)) return Error{"cannot read /dev/urandom for a job token"};
  std::string token;
  char hex[3];
  for (unsigned char b : bytes) {
    std::snprintf(hex, sizeof hex, "%02x", b);
    token += hex;
  }
  return token;
}

}  // namespace troupe::apps
