# NCCL: the GPU all-reduce of examples/mpi_data_parallel.cpp (examples/nccl_all_reduce.cpp) and
# its test (tests/mpi/mpi_nccl_test.cpp). Nothing in libsluice uses it.
#
# SLUICE_WITH_NCCL: AUTO (default) uses NCCL when CUDA is on and nccl.h and libnccl are found;
# ON requires them; OFF does not look. Searched in NCCL_ROOT (a CMake or environment variable),
# then the CUDA toolkit (the CUDA 13 toolkit here ships NCCL), then the system (Debian's
# libnccl-dev). Sets SLUICE_NCCL_ENABLED and, when ON, the imported target sluice::nccl, which
# the targets that need it link to: no global flag or include path.
set(SLUICE_NCCL_ENABLED OFF)
if(NOT SLUICE_WITH_NCCL STREQUAL "OFF")
  set(sluice_nccl_missing "")
  if(NOT SLUICE_CUDA_ENABLED)
    set(sluice_nccl_missing "CUDA is off")
  else()
    find_package(CUDAToolkit QUIET)  # found already (GLOBAL) by src/device: its folders
    set(sluice_nccl_roots ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_TARGET_DIR} ${CUDAToolkit_LIBRARY_ROOT})
    find_path(SLUICE_NCCL_INCLUDE_DIR nccl.h
      HINTS ${sluice_nccl_roots} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
    find_library(SLUICE_NCCL_LIBRARY nccl
      HINTS ${sluice_nccl_roots} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib64 lib)
    if(NOT SLUICE_NCCL_INCLUDE_DIR OR NOT SLUICE_NCCL_LIBRARY)
      set(sluice_nccl_missing "nccl.h or libnccl not found (set NCCL_ROOT)")
    else()
      # ncclRedOpCreatePreMulSum (the per-rank scale of the gradients) needs NCCL 2.11.
      file(STRINGS ${SLUICE_NCCL_INCLUDE_DIR}/nccl.h sluice_nccl_version_lines
           REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
      set(SLUICE_NCCL_VERSION "")
      foreach(part MAJOR MINOR PATCH)
        string(REGEX MATCH "NCCL_${part} +([0-9]+)" _ "${sluice_nccl_version_lines}")
        list(APPEND SLUICE_NCCL_VERSION ${CMAKE_MATCH_1})
      endforeach()
      list(JOIN SLUICE_NCCL_VERSION "." SLUICE_NCCL_VERSION)
      if(SLUICE_NCCL_VERSION VERSION_LESS 2.11)
        set(sluice_nccl_missing "NCCL ${SLUICE_NCCL_VERSION} at ${SLUICE_NCCL_INCLUDE_DIR} is older than 2.11")
      endif()
    endif()
  endif()
  if(sluice_nccl_missing STREQUAL "")
    set(SLUICE_NCCL_ENABLED ON)
    if(NOT TARGET sluice::nccl)
      add_library(sluice::nccl UNKNOWN IMPORTED GLOBAL)
      set_target_properties(sluice::nccl PROPERTIES
        IMPORTED_LOCATION ${SLUICE_NCCL_LIBRARY}
        INTERFACE_INCLUDE_DIRECTORIES ${SLUICE_NCCL_INCLUDE_DIR})
      target_link_libraries(sluice::nccl INTERFACE CUDA::cudart)
    endif()
    message(STATUS "sluice: NCCL ${SLUICE_NCCL_VERSION} for the MPI example (${SLUICE_NCCL_LIBRARY})")
  elseif(SLUICE_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "SLUICE_WITH_NCCL=ON but ${sluice_nccl_missing}")
  else()
    message(STATUS "sluice: NCCL off (${sluice_nccl_missing})")
  endif()
endif()
