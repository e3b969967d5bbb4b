# The layering check must be able to fail: run it on a fixture tree (fixture/) whose files break
# each rule once (a module including a module it may not depend on, public and private headers,
# quoted and angle-bracket includes, src/cli and src/python, an internal detail/ header, a
# sub-module of stages reaching up) and check that it fails naming each,
# and that it leaves the allowed includes (fixture/src/python/allowed.cpp) alone.
# Usage: cmake -DCHECK=<check_layering.cmake> -DFIXTURE=<fixture dir> -P check_layering_test.cmake
execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${FIXTURE} -P ${CHECK}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "the layering check passed a tree that breaks it:\n${out}${err}")
endif()
set(expected
  "src/python/reaches_stages.cpp: python includes a private header of stages"
  "src/python/reaches_device.cpp: python includes a private header of device"
  "src/cli/reaches_c.cpp: cli includes c"
  "src/runtime/reaches_train.cpp: runtime includes train"
  "src/c/reaches_runtime_private.cpp: c includes a private header of runtime"
  "include/sluice/pipeline/reaches_runtime.hpp: pipeline includes runtime"
  "src/memory/reaches_detail_device.cpp: memory includes device"
  "src/stages/decode/reaches_program.cpp: stages/decode includes stages/program")
foreach(line IN LISTS expected)
  string(FIND "${err}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the layering check did not report \"${line}\":\n${err}")
  endif()
endforeach()
string(FIND "${err}" "allowed.cpp" at)
if(NOT at EQUAL -1)
  message(FATAL_ERROR "the layering check reported an allowed include:\n${err}")
endif()
message(STATUS "layering check: fails on each violation of the fixture, and only on those")
