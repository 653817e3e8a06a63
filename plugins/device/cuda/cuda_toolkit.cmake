# Decides whether the CUDA device plugin (plugins/device/cuda) is built; included from plugins/CMakeLists.txt.
# Sets STRATA_CUDA_ENABLED. Nothing here enables CUDA for any other target: only that plugin (and tools/gpu) links
# the CUDA runtime.
#
#   STRATA_WITH_CUDA = AUTO (default): build it when nvcc and the toolkit are found, otherwise say why and skip.
#                      ON:             the same, but a missing toolkit is a configure error.
#                      OFF:            never build it.
include(CheckLanguage)

set(STRATA_WITH_CUDA AUTO CACHE STRING "Build the CUDA device plugin: AUTO (when the toolkit is found), ON, OFF")
set_property(CACHE STRATA_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
set(STRATA_CUDA_ENABLED OFF)

string(TOUPPER "${STRATA_WITH_CUDA}" strata_with_cuda)
if(NOT strata_with_cuda MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "STRATA_WITH_CUDA is '${STRATA_WITH_CUDA}'; use AUTO, ON or OFF")
endif()
if(strata_with_cuda STREQUAL "OFF")
  message(STATUS "CUDA device plugin: skipped (STRATA_WITH_CUDA=OFF)")
  return()
endif()

# nvcc from -DCMAKE_CUDA_COMPILER, $CUDACXX or PATH; failing those, the toolkit's usual home, which is often not on
# PATH. An nvcc on PATH that is not inside a toolkit (a wrapper script; CMake cannot identify the toolkit through
# it) counts as absent.
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  find_program(STRATA_NVCC_ON_PATH nvcc NO_CACHE)
  if(STRATA_NVCC_ON_PATH)
    file(REAL_PATH "${STRATA_NVCC_ON_PATH}" strata_nvcc_real)
    get_filename_component(strata_nvcc_dir "${strata_nvcc_real}" DIRECTORY)
  endif()
  if(NOT STRATA_NVCC_ON_PATH OR NOT EXISTS "${strata_nvcc_dir}/nvcc.profile")
    set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
  endif()
endif()
check_language(CUDA)

set(strata_cuda_missing "")
if(NOT CMAKE_CUDA_COMPILER)
  set(strata_cuda_missing "no working CUDA compiler (nvcc not on PATH, not in $CUDACXX, not at /usr/local/cuda/bin)")
else()
  # Look for the toolkit next to the compiler that was found.
  get_filename_component(strata_nvcc_bin "${CMAKE_CUDA_COMPILER}" DIRECTORY)
  get_filename_component(strata_cuda_root "${strata_nvcc_bin}" DIRECTORY)
  if(NOT DEFINED CUDAToolkit_ROOT)
    set(CUDAToolkit_ROOT "${strata_cuda_root}")
  endif()
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND)
    set(strata_cuda_missing "nvcc found at ${CMAKE_CUDA_COMPILER} but find_package(CUDAToolkit) failed")
  elseif(NOT TARGET CUDA::cudart_static)
    set(strata_cuda_missing "the CUDA toolkit at ${CUDAToolkit_LIBRARY_ROOT} has no static runtime (cudart_static)")
  elseif(CUDAToolkit_VERSION VERSION_LESS 12.0)
    set(strata_cuda_missing "CUDA toolkit ${CUDAToolkit_VERSION} is too old; the plugin needs 12.0 or newer")
  endif()
endif()

if(strata_cuda_missing)
  if(strata_with_cuda STREQUAL "ON")
    message(FATAL_ERROR "STRATA_WITH_CUDA=ON but ${strata_cuda_missing}")
  endif()
  message(STATUS "CUDA device plugin: skipped, ${strata_cuda_missing} (STRATA_WITH_CUDA=AUTO)")
  return()
endif()

message(STATUS "CUDA device plugin: building with CUDA ${CUDAToolkit_VERSION} (${CMAKE_CUDA_COMPILER})")
set(STRATA_CUDA_ENABLED ON)
