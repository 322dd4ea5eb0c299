#pragma once
// What the launcher runs for one node process: where, which program, and the variables it is
// given. rank_plan produces these from a host file; node_launcher runs them.

#include <string>
#include <utility>
#include <vector>

namespace troupe::launch {

// Environment variables as (name, value), in the order they are exported.
using Environment = std::vector<std::pair<std::string, std::string>>;

struct NodeProcessSpec {
  int node_index = 0;             // host-file line order, from 0
  std::string host;               // as written in the host file
  bool local = false;             // on this machine: fork/exec; else through the launcher template
  std::vector<std::string> argv;  // the node program and its arguments
  Environment env;                // set on top of the launcher's own (local) or alone (remote)
};

}  // namespace troupe::launch
