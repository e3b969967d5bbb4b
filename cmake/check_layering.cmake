# Layering check, run as a test: a module may include only itself and modules to its left in
# core <- memory <- pipeline <- stages <- runtime (DESIGN.md). Scans include/sluice/<module> and
# src/<module> for #include "sluice/<m>/..." and "<m>/..." and fails naming each violation.
# Usage: cmake -DSOURCE_DIR=<repo> -P check_layering.cmake
set(order core memory pipeline stages runtime)
set(violations "")
foreach(module IN LISTS order)
  list(FIND order ${module} rank)
  file(GLOB_RECURSE files
    ${SOURCE_DIR}/include/sluice/${module}/*.hpp
    ${SOURCE_DIR}/src/${module}/*.hpp ${SOURCE_DIR}/src/${module}/*.cpp)
  foreach(file IN LISTS files)
    file(STRINGS ${file} includes REGEX "^#include \"")
    foreach(line IN LISTS includes)
      string(REGEX MATCH "^#include \"(sluice/)?([a-z_]+)/" _ "${line}")
      set(target ${CMAKE_MATCH_2})
      list(FIND order "${target}" target_rank)
      if(target_rank GREATER rank)
        file(RELATIVE_PATH rel ${SOURCE_DIR} ${file})
        list(APPEND violations "${rel}: ${module} includes ${target} (${line})")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "modules include modules to their right:\n  ${text}")
endif()
message(STATUS "layering: ok")
