#pragma once
// Whether this process can use a CUDA device. cudart is linked statically and loads the driver
// (libcuda.so) only here, so a binary built with the CUDA backend starts and runs its CPU paths
// on a machine with no GPU or no driver; asking for the device is what fails, as an Error.

#include <string>

#include "compute/expected.hpp"

namespace troupe::compute {

// The current device's name and compute capability ("NVIDIA H100 80GB HBM3, sm_90"), or
// "no CUDA device: <the runtime's reason>", or a device older than the sm_80 this build targets.
Expected<std::string> cuda_device();

// Makes device `local_rank` current for the calling thread (the CUDA runtime's current device is
// per thread: call it on every thread that works for the rank), so each rank on a host has a
// device of its own. An Error when the host has fewer devices than that, or none.
Status use_cuda_device(int local_rank);

}  // namespace troupe::compute
