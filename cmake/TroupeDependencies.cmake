# Finds every dependency named in docs/design.md. Each is required except CUDA, which is detected.
# scripts/install-deps.sh installs them all from Debian packages.

find_package(Threads REQUIRED)
find_package(ucx CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(Catch2 2 CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(tomlplusplus CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(Boost 1.74 REQUIRED)

# OpenBLAS through CMake's FindBLAS, and its CBLAS header (Debian: an alternatives link).
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(TROUPE_CBLAS_INCLUDE NAMES cblas.h PATH_SUFFIXES openblas REQUIRED)
add_library(troupe::openblas INTERFACE IMPORTED)
target_link_libraries(troupe::openblas INTERFACE BLAS::BLAS)
target_include_directories(troupe::openblas INTERFACE ${TROUPE_CBLAS_INCLUDE})

# oneDNN (Debian's libdnnl-dev) multiplies bf16 for train.precision bf16 on the CPU. Its CMake
# config asks for OpenCL, which the CPU products do not use, so the library is wrapped here. It
# threads with OpenMP, whose thread count the one file that calls it sets (compute/CMakeLists.txt).
find_library(TROUPE_DNNL dnnl REQUIRED)
find_path(TROUPE_DNNL_INCLUDE oneapi/dnnl/dnnl.hpp REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
add_library(troupe::dnnl UNKNOWN IMPORTED)
set_target_properties(troupe::dnnl PROPERTIES IMPORTED_LOCATION ${TROUPE_DNNL}
  INTERFACE_INCLUDE_DIRECTORIES ${TROUPE_DNNL_INCLUDE} INTERFACE_LINK_LIBRARIES "${OpenMP_CXX_LIBRARIES}")

# CAF 0.17 ships no CMake config: wrap the libraries as imported targets.
find_library(TROUPE_CAF_CORE caf_core REQUIRED)
find_library(TROUPE_CAF_IO caf_io REQUIRED)
find_path(TROUPE_CAF_INCLUDE caf/all.hpp REQUIRED)
add_library(troupe::caf INTERFACE IMPORTED)
target_link_libraries(troupe::caf INTERFACE ${TROUPE_CAF_IO} ${TROUPE_CAF_CORE} Threads::Threads)
target_include_directories(troupe::caf INTERFACE ${TROUPE_CAF_INCLUDE})
target_compile_definitions(troupe::caf INTERFACE CAF_ENABLE_TYPE_ID_CHECKS)

find_library(TROUPE_XXHASH xxhash REQUIRED)
find_path(TROUPE_XXHASH_INCLUDE xxhash.h REQUIRED)
add_library(troupe::xxhash UNKNOWN IMPORTED)
set_target_properties(troupe::xxhash PROPERTIES IMPORTED_LOCATION ${TROUPE_XXHASH}
  INTERFACE_INCLUDE_DIRECTORIES ${TROUPE_XXHASH_INCLUDE})

find_library(TROUPE_EDIT edit REQUIRED)
find_path(TROUPE_EDIT_INCLUDE editline/readline.h REQUIRED)
add_library(troupe::edit UNKNOWN IMPORTED)
set_target_properties(troupe::edit PROPERTIES IMPORTED_LOCATION ${TROUPE_EDIT}
  INTERFACE_INCLUDE_DIRECTORIES ${TROUPE_EDIT_INCLUDE})

# CUDA backend (compute/cuda, comm/nccl). TROUPE_CUDA=AUTO builds it when /usr/local/cuda (or
# CUDAToolkit_ROOT) has nvcc, cuBLAS and NCCL; ON requires them; OFF skips the CUDA targets (a
# CPU-only build compiles faster). No GPU is needed to build: cudart is linked statically and
# loads the driver only when a CUDA backend is made.
set(TROUPE_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO (when the toolkit is found), ON or OFF")
set_property(CACHE TROUPE_CUDA PROPERTY STRINGS AUTO ON OFF)
set(TROUPE_HAVE_CUDA OFF)
if(TROUPE_CUDA)  # AUTO, ON (or any true value); OFF skips
  if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  find_library(TROUPE_NCCL nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(TROUPE_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(CUDAToolkit_FOUND AND TARGET CUDA::cublas AND TARGET CUDA::cublasLt AND TROUPE_NCCL AND TROUPE_NCCL_INCLUDE)
    set(TROUPE_HAVE_CUDA ON)
  elseif(NOT TROUPE_CUDA STREQUAL "AUTO")
    message(FATAL_ERROR "TROUPE_CUDA=ON but nvcc, cuBLAS/cuBLASLt or NCCL is missing (looked in '${CUDAToolkit_ROOT}')")
  endif()
endif()
if(TROUPE_HAVE_CUDA)
  set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)  # A100, H100
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no C++20 flag for nvcc; the kernels need only 17
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  add_library(troupe::nccl UNKNOWN IMPORTED)
  set_target_properties(troupe::nccl PROPERTIES IMPORTED_LOCATION ${TROUPE_NCCL}
    INTERFACE_INCLUDE_DIRECTORIES ${TROUPE_NCCL_INCLUDE})
  message(STATUS "Troupe CUDA backend: ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, sm ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "Troupe CUDA backend: OFF (TROUPE_CUDA=${TROUPE_CUDA})")
endif()
