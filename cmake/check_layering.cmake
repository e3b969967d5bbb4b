# Layering check, run as a test: a module may include only the modules it is allowed to depend on
# (docs/design.md): core <- memory <- pipeline <- stages <- runtime, and core, memory <- device <- train;
# runtime may use device; c (the C API), cli (the command line) and python (the Python module)
# sit on top. Scans include/sluice/<module> and src/<module> for #include "sluice/<m>/..." (a
# public header) and "<m>/..." (a private one, src/<m>/) and fails naming each violation.
#
# Private headers are a module's own business: another module may include them only where the
# list below allows it, each with its reason.
# Usage: cmake -DSOURCE_DIR=<repo> -P check_layering.cmake
set(modules core memory pipeline stages runtime device train c cli python)
set(allowed_core "")
set(allowed_memory core)
set(allowed_pipeline core memory)
set(allowed_stages core memory pipeline)
set(allowed_runtime core memory pipeline stages device)
set(allowed_device core memory)
set(allowed_train core memory device)
set(allowed_c core memory pipeline stages runtime device)
set(allowed_cli core memory pipeline stages runtime device train)
set(allowed_python core memory pipeline stages runtime device train c)

# Whose private headers (src/<m>/...) a module may include.
#  stages  -> pipeline: the stage registry (pipeline/stage_registry.hpp), which plans and checks a
#                       spec against each stage's descriptor
#  runtime -> stages:   the runtime executes what the stages plan (plan, program, caches, reads)
#  train   -> device:   the training core's CUDA backend drives the device module's CUDA shim
#  c       -> device:   the one DLPack export makes a consumer's CUDA stream wait for a batch's copy
#                       (c/dlpack_export.cpp: device/cuda_backend.hpp's stream_wait_event; a batch
#                       knows its copy only as a cudaEvent_t, and the public Stream waits only on
#                       an Event it owns); sluice_batch_use_on_stream and __dlpack__(stream) use it
#  cli     -> stages:   inspect and bench list and decode with the stages' own code, so they report
#                       what a pipeline would see
#  python  -> c:        the one DLPack export both bindings share (c/dlpack_export.hpp)
set(private_stages pipeline)
set(private_runtime stages)
set(private_train device)
set(private_c device)
set(private_cli stages)
set(private_python c)

set(violations "")
foreach(module IN LISTS modules)
  file(GLOB_RECURSE files
    ${SOURCE_DIR}/include/sluice/${module}/*.hpp ${SOURCE_DIR}/include/sluice/${module}/*.h
    ${SOURCE_DIR}/src/${module}/*.hpp ${SOURCE_DIR}/src/${module}/*.cpp ${SOURCE_DIR}/src/${module}/*.cu
    ${SOURCE_DIR}/src/${module}/*.h ${SOURCE_DIR}/src/${module}/*.c)
  foreach(file IN LISTS files)
    file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
    foreach(line IN LISTS includes)
      if(NOT line MATCHES "#[ \t]*include[ \t]*[\"<](sluice/)?([a-z_]+)/")
        continue()
      endif()
      set(public "${CMAKE_MATCH_1}")
      set(target "${CMAKE_MATCH_2}")
      list(FIND modules "${target}" is_module)
      if(is_module EQUAL -1 OR target STREQUAL module)
        continue()
      endif()
      file(RELATIVE_PATH rel ${SOURCE_DIR} ${file})
      string(STRIP "${line}" shown)
      list(FIND allowed_${module} "${target}" is_allowed)
      if(is_allowed EQUAL -1)
        list(APPEND violations "${rel}: ${module} includes ${target} (${shown})")
      elseif(NOT public)
        list(FIND private_${module} "${target}" is_private_allowed)
        if(is_private_allowed EQUAL -1)
          list(APPEND violations "${rel}: ${module} includes a private header of ${target} (${shown})")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "modules include modules they may not depend on:\n  ${text}")
endif()
message(STATUS "layering: ok")
