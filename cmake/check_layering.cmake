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
#  cli     -> pipeline: the one statistics schema and JSON writer (pipeline/stats_json.hpp,
#                       pipeline/json_text.hpp: nlohmann documents, which public headers keep out),
#                       so `bench --json` writes the statistics as C and Python do, and every JSON
#                       the CLI writes keeps paths that are not UTF-8 (docs/stats.md)
#  python  -> c:        the one DLPack export both bindings share (c/dlpack_export.hpp)
set(private_stages pipeline)
set(private_runtime stages)
set(private_train device)
set(private_c device)
set(private_cli stages pipeline)
set(private_python c)

set(violations "")
foreach(module IN LISTS modules)
  file(GLOB_RECURSE files
    ${SOURCE_DIR}/include/sluice/${module}/*.hpp ${SOURCE_DIR}/include/sluice/${module}/*.h
    ${SOURCE_DIR}/include/sluice/detail/${module}/*.hpp
    ${SOURCE_DIR}/src/${module}/*.hpp ${SOURCE_DIR}/src/${module}/*.cpp ${SOURCE_DIR}/src/${module}/*.cu
    ${SOURCE_DIR}/src/${module}/*.h ${SOURCE_DIR}/src/${module}/*.c)
  foreach(file IN LISTS files)
    file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
    foreach(line IN LISTS includes)
      # sluice/<m>/ is public, sluice/detail/<m>/ the library's internal headers (not installed,
      # shared by its modules along the same one-way order), <m>/ a module's private header.
      if(NOT line MATCHES "#[ \t]*include[ \t]*[\"<](sluice/(detail/)?)?([a-z_]+)/")
        continue()
      endif()
      set(public "${CMAKE_MATCH_1}")
      set(target "${CMAKE_MATCH_3}")
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
# Sub-modules: the folders inside src/stages and src/train depend on each other one way too
# (docs/design.md). sub_<module>_<folder> lists the folders that folder may include; a folder
# not listed may include none. Exceptions name the one header and say why:
#  stages/source -> stages/tar/tar_source.hpp: load_dataset dispatches a spec::Shards source to
#                   the tar source, which is built on the item table like the others
#  stages/source -> stages/tar/tar_format.hpp: ItemReader checks a member's header block as it
#                   reads a member's bytes with it in one pread
#  train/tensor  -> train/cuda/cuda_workspace.hpp: the CUDA backend's workspace arithmetic, plain
#                   C++, which contexts use to plan a CUDA step on a machine without a GPU
set(submodule_parents stages train)
set(sub_stages_source decode remote)  # decode: the extensions the decoders read say which files are images; remote: lists and objects named by URL
set(sub_stages_tar source decode remote)  # remote: shards named by URL, fetched by stages/remote
set(sub_stages_cache source)
set(sub_stages_program source tar decode image cache remote augment)
set(sub_stages_augment "")  # augment: pure pixel kernels on image views, core/detail headers only
set(sub_train_cpu tensor)
set(sub_train_cuda tensor)
set(sub_train_plan tensor)
set(sub_exceptions
  "stages/source:stages/tar/tar_source.hpp" "stages/source:stages/tar/tar_format.hpp"
  "train/tensor:train/cuda/cuda_workspace.hpp")
foreach(parent IN LISTS submodule_parents)
  file(GLOB children LIST_DIRECTORIES true ${SOURCE_DIR}/src/${parent}/*)
  foreach(child_dir IN LISTS children)
    if(NOT IS_DIRECTORY ${child_dir})
      continue()
    endif()
    get_filename_component(child ${child_dir} NAME)
    file(GLOB_RECURSE files ${child_dir}/*.hpp ${child_dir}/*.cpp ${child_dir}/*.cu ${child_dir}/*.cuh)
    foreach(file IN LISTS files)
      file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"${parent}/[a-z_]+/")
      foreach(line IN LISTS includes)
        if(NOT line MATCHES "\"(${parent}/([a-z_]+)/[^\"]+)\"")
          continue()
        endif()
        set(header "${CMAKE_MATCH_1}")
        set(target "${CMAKE_MATCH_2}")
        if(target STREQUAL child)
          continue()
        endif()
        list(FIND sub_${parent}_${child} "${target}" is_allowed)
        list(FIND sub_exceptions "${parent}/${child}:${header}" is_exception)
        if(is_allowed EQUAL -1 AND is_exception EQUAL -1)
          file(RELATIVE_PATH rel ${SOURCE_DIR} ${file})
          list(APPEND violations "${rel}: ${parent}/${child} includes ${parent}/${target} (${header})")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()

if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "modules include modules they may not depend on:\n  ${text}")
endif()
message(STATUS "layering: ok (modules and the sub-modules of stages and train)")
