#pragma once
// Every token id must index the embedding table. A GPT-2 token file fed to a byte-level model
// would otherwise read past the table; checking once at load time turns that into an error that
// says where the first bad token sits.

#include <cstdint>
#include <span>
#include <string>

#include "compute/expected.hpp"

namespace troupe::compute {

// Error when some token id >= vocab_size, naming `what` (e.g. the file), the first such id, its
// position and the vocabulary size.
Status check_tokens_fit(std::span<const std::uint16_t> tokens, int vocab_size, const std::string& what);

}  // namespace troupe::compute
