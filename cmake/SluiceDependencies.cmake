# Third-party libraries, all from Debian's packages (scripts/setup installs them).
find_package(Threads REQUIRED)
find_package(TBB REQUIRED CONFIG)
find_package(libjpeg-turbo REQUIRED CONFIG)
find_package(Boost 1.74 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
# The decode stage's other formats (docs/decisions/image-formats.md): PNG, WebP (and its demuxer,
# for animations), TIFF, GIF.
pkg_check_modules(SPNG REQUIRED IMPORTED_TARGET spng)
# libdeflate: the whole-image PNG path's inflate and CRC-32 (src/stages/decode/png_fast.hpp).
pkg_check_modules(DEFLATE REQUIRED IMPORTED_TARGET libdeflate)
pkg_check_modules(WEBP REQUIRED IMPORTED_TARGET libwebp libwebpdemux)
pkg_check_modules(TIFF REQUIRED IMPORTED_TARGET libtiff-4)
find_package(GIF 5 REQUIRED)
# Shards named by URL (src/stages/remote): libcurl's multi interface and CURLOPT_AWS_SIGV4 (7.75+).
find_package(CURL 7.75 REQUIRED)

if(SLUICE_BUILD_CLI)
  find_package(CLI11 REQUIRED CONFIG)
  find_package(nlohmann_json 3.10 REQUIRED CONFIG)
  find_package(ZLIB REQUIRED)
endif()

# CUDA: AUTO turns it on when a toolkit is found; its code lives only in src/device and
# src/train/cuda, so a build without it builds and tests everything else.
set(SLUICE_CUDA_ENABLED OFF)
if(NOT SLUICE_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(SLUICE_CUDA_ENABLED ON)
  elseif(SLUICE_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SLUICE_WITH_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "sluice: CUDA backends ${SLUICE_CUDA_ENABLED}")
