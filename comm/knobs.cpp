#include "comm/knobs.hpp"

#include "compute/environment.hpp"

namespace troupe::comm {

Expected<std::int64_t> read_knob(const Knob& knob) { return environment_integer(knob.name, knob.fallback, 0); }

Status check_knobs() {
  for (const Knob& knob : knobs) {
    if (auto value = read_knob(knob); !value) return value.error();
  }
  return Status::success();
}

std::int64_t knob_value(const Knob& knob) {
  auto value = read_knob(knob);
  TROUPE_CHECK(value.ok(), "read after Engine::create checked the knobs: " + value.error().message);
  return *value;
}

}  // namespace troupe::comm
