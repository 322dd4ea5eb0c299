#pragma once
// How context attention joins the ranks of a context group (context.method): ring (K/V blocks
// around the ring, ring_attention.hpp) or all_to_all (heads exchanged, head_all_to_all.hpp).

#include <string_view>

namespace troupe::compute::context {

enum class ContextMethod { ring, all_to_all };
inline constexpr ContextMethod context_methods[] = {ContextMethod::ring, ContextMethod::all_to_all};
inline std::string_view context_method_name(ContextMethod method) {
  return method == ContextMethod::ring ? "ring" : "all_to_all";
}

}  // namespace troupe::compute::context
