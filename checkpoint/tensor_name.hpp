#pragma once
// How a shard names what it stores, so any grid can find it again (docs/formats/checkpoint.md):
//   <kind>/<global name>               the whole tensor, with the parameter's shape
//   <kind>/<global name>[<from>:<to>]  elements [from, to) of the flattened tensor, 1-D
// e.g. "param/h.3.attn.c_attn.weight" or "adam_m/wte.weight[0:16384]".

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::checkpoint {

struct TensorName {
  std::string kind;
  std::string parameter;  // the global name in compute::ParameterLayout
  // [from, to) within the flattened parameter; nullopt for the whole tensor.
  std::optional<std::pair<std::int64_t, std::int64_t>> slice;
};

std::string format_tensor_name(const TensorName& name);
// nullopt when `text` does not follow the scheme.
std::optional<TensorName> parse_tensor_name(std::string_view text);

}  // namespace troupe::checkpoint
