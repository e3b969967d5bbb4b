# sluice_add_module(<name> SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# One object library per module (sluice_<name>); libsluice is their union. Dependencies are
# declared along the module order core <- memory <- pipeline <- stages <- runtime, and the test
# `layering` (cmake/check_layering.cmake) fails if a module includes one to its right.
function(sluice_add_module name)
  cmake_parse_arguments(arg "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  set(target sluice_${name})
  add_library(${target} OBJECT ${arg_SOURCES})
  target_compile_features(${target} PUBLIC cxx_std_20)
  set_target_properties(${target} PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    CXX_EXTENSIONS OFF
    CXX_VISIBILITY_PRESET default)
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANG_AND_ID:CXX,GNU,Clang>:-Wall -Wextra -Wpedantic -Wno-missing-field-initializers>)
  target_link_libraries(${target} PUBLIC ${arg_PUBLIC_DEPS} PRIVATE ${arg_PRIVATE_DEPS})
  set_property(GLOBAL APPEND PROPERTY SLUICE_MODULES ${target})
endfunction()
