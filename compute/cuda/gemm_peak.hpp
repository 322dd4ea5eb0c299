#pragma once
// The device's measured bf16 GEMM rate: the denominator of MFU in `troupe bench gpu`, taken in
// the same run as the model figures so the ratio means the same on any GPU.

#include "compute/expected.hpp"

namespace troupe::compute {

// FLOP/s of the best of `iterations` timed n × n × n cuBLASLt GEMMs (bf16 inputs and output,
// fp32 accumulation) on the current device, after one warm-up. Inputs are a constant bf16
// value: tensor-core throughput does not depend on the values, though power draw may.
Expected<double> measure_bf16_gemm_peak(int n, int iterations);

}  // namespace troupe::compute
