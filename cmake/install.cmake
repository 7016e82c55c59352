# What `cmake --install` puts where, in three components that are also the
# Debian packages `cpack -G DEB` makes (docs/library.md):
#   cli   optstate, its man pages and bash completion      -> optstate
#   dist  optstate-dist (links LibTorch, for --distributed) -> optstate-dist
#   dev   headers, liboptstate.{a,so}, the package config   -> optstate-dev
# The man pages and completion are declared in tools/CMakeLists.txt.
include(CMakePackageConfigHelpers)

install(TARGETS optstate RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
if(TARGET optstate-dist)
  install(TARGETS optstate-dist RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT dist)
endif()
install(DIRECTORY lib/include/optstate DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
        PATTERN libtorch EXCLUDE)  # optstate-dist's coordinator: not in the libraries
install(TARGETS optstate_static optstate_shared EXPORT optstateTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
set(OPTSTATE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/optstate)
install(EXPORT optstateTargets NAMESPACE optstate:: DESTINATION ${OPTSTATE_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(cmake/optstateConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/optstateConfig.cmake
                              INSTALL_DESTINATION ${OPTSTATE_CMAKE_DIR})
# Before 1.0 a minor version may change the API, so only the same minor matches.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/optstateConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/optstateConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/optstateConfigVersion.cmake
        DESTINATION ${OPTSTATE_CMAKE_DIR} COMPONENT dev)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME optstate)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "read, check and repair PyTorch optimizer checkpoints without Python")
set(CPACK_PACKAGE_CONTACT "optstate developers <optstate@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL cli dev)
if(TARGET optstate-dist)
  list(APPEND CPACK_COMPONENTS_ALL dist)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # Depends from the libraries the binaries load
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_CLI_PACKAGE_NAME optstate)
set(CPACK_DEBIAN_DIST_PACKAGE_NAME optstate-dist)
set(CPACK_DEBIAN_DIST_PACKAGE_DEPENDS "optstate (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME optstate-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# find_package(optstate) finds these for optstate::optstate_static.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "nlohmann-json3-dev (>= 3.10), libzstd-dev")
# The first line of each package's Description is the summary above; these follow it.
set(CPACK_COMPONENT_CLI_DESCRIPTION "The optstate command: inspect, validate, remap, migrate, consolidate and \
reshard torch.save, DCP and DeepSpeed ZeRO checkpoints without executing pickle code.")
set(CPACK_COMPONENT_DIST_DESCRIPTION "optstate-dist, linked with LibTorch's c10d, shares reshard and export \
among the processes of a torchrun or srun job (optstate --distributed).")
set(CPACK_COMPONENT_DEV_DESCRIPTION "The C++ library: headers, liboptstate.a and liboptstate.so, and the \
CMake package config (find_package(optstate): optstate::optstate, optstate::optstate_static).")
include(CPack)
