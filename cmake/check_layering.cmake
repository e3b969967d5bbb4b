# Layering check, run as a test: a module may include only the modules it is allowed to depend on
# (DESIGN.md): core <- memory <- pipeline <- stages <- runtime, and core, memory <- device <- train;
# runtime may use device; c (the C API) sits on top of everything. Scans include/sluice/<module>
# and src/<module> for #include "sluice/<m>/..." and "<m>/..." and fails naming each violation.
# Usage: cmake -DSOURCE_DIR=<repo> -P check_layering.cmake
set(modules core memory pipeline stages runtime device train c)
set(allowed_core "")
set(allowed_memory core)
set(allowed_pipeline core memory)
set(allowed_stages core memory pipeline)
set(allowed_runtime core memory pipeline stages device)
set(allowed_device core memory)
set(allowed_train core memory device)
set(allowed_c core memory pipeline stages runtime device)
set(violations "")
foreach(module IN LISTS modules)
  file(GLOB_RECURSE files
    ${SOURCE_DIR}/include/sluice/${module}/*.hpp
    ${SOURCE_DIR}/src/${module}/*.hpp ${SOURCE_DIR}/src/${module}/*.cpp ${SOURCE_DIR}/src/${module}/*.cu)
  foreach(file IN LISTS files)
    file(STRINGS ${file} includes REGEX "^#include \"")
    foreach(line IN LISTS includes)
      string(REGEX MATCH "^#include \"(sluice/)?([a-z_]+)/" _ "${line}")
      set(target ${CMAKE_MATCH_2})
      list(FIND modules "${target}" is_module)
      list(FIND allowed_${module} "${target}" is_allowed)
      if(is_module GREATER -1 AND NOT target STREQUAL module AND is_allowed EQUAL -1)
        file(RELATIVE_PATH rel ${SOURCE_DIR} ${file})
        list(APPEND violations "${rel}: ${module} includes ${target} (${line})")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "modules include modules they may not depend on:\n  ${text}")
endif()
message(STATUS "layering: ok")
