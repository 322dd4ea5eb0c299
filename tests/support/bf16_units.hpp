#pragma once
// The bf16 product kernels a test can check on this CPU: the emulated ones always, the BF16 units'
// where the CPU has them.

#include <vector>

#include "compute/cpu/bf16_products.hpp"

namespace troupe::test {

inline std::vector<compute::cpu::Bf16Units> bf16_units_to_check() {
  std::vector<compute::cpu::Bf16Units> units{compute::cpu::Bf16Units::emulated};
  if (compute::cpu::bf16_units_present()) units.push_back(compute::cpu::Bf16Units::hardware);
  return units;
}

inline const char* bf16_units_name(compute::cpu::Bf16Units units) {
  return units == compute::cpu::Bf16Units::hardware ? "BF16 units" : "emulated";
}

}  // namespace troupe::test
