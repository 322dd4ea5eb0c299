#include "compute/model/recompute.hpp"

namespace troupe::compute {

std::string recompute_name(Recompute recompute) {
  switch (recompute) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

}  // namespace troupe::compute
