#pragma once

namespace troupe::tests {
// The exit code of a [gpu] test run without a device; tests/CMakeLists.txt gives it to ctest as
// SKIP_RETURN_CODE.
constexpr int kSkipped = 77;
}  // namespace troupe::tests
