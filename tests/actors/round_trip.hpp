#pragma once
// A message through CAF's binary serialization and back, as it crosses a process boundary: what
// the other side would read.

#include <catch2/catch.hpp>

#include <vector>

#include <caf/actor_system.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

namespace troupe::test {

template <class T>
T round_trip(caf::actor_system& system, const T& value) {
  std::vector<char> buffer;
  caf::binary_serializer sink{system, buffer};
  T copy = value;
  REQUIRE(!sink(copy));
  caf::binary_deserializer source{system, buffer};
  T result;
  REQUIRE(!source(result));
  return result;
}

}  // namespace troupe::test
