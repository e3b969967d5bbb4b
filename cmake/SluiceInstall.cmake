# Install rules and the package config that lets a consumer write find_package(sluice).
include(CMakePackageConfigHelpers)

# An installed libsluice finds the external libraries it was linked with where they were (CUDA's
# runtime in /usr/local/cuda) without LD_LIBRARY_PATH; the build tree's own folders are never among
# them. OpenBLAS and cuBLAS are dlopen()ed by name (src/train/cpu/openblas_api.hpp,
# src/train/cuda/cublas_api.hpp): the loader's own path finds them.
set_target_properties(sluice PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS sluice EXPORT sluiceTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# include/sluice/detail holds the library's internal headers (pinned memory, the transfer ring,
# aligned buffers, half floats, ...): used across its modules, never by a consumer, so not
# installed. tests/package builds a consumer from what is installed, which proves the public set
# is enough.
install(DIRECTORY include/sluice DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} PATTERN detail EXCLUDE)
if(TARGET sluice_cli)
  install(TARGETS sluice_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)
install(EXPORT sluiceTargets NAMESPACE sluice:: DESTINATION ${config_dir})
configure_package_config_file(cmake/sluiceConfig.cmake.in
  ${PROJECT_BINARY_DIR}/sluiceConfig.cmake INSTALL_DESTINATION ${config_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sluiceConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sluiceConfig.cmake ${PROJECT_BINARY_DIR}/sluiceConfigVersion.cmake
  DESTINATION ${config_dir})
