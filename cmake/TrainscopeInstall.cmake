include(CMakePackageConfigHelpers)

install(TARGETS trainscope EXPORT trainscopeTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/trainscope DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(TRAINSCOPE_CONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/trainscope)
install(EXPORT trainscopeTargets NAMESPACE trainscope:: DESTINATION ${TRAINSCOPE_CONFIG_DIR})
configure_package_config_file(cmake/trainscopeConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/trainscopeConfig.cmake
  INSTALL_DESTINATION ${TRAINSCOPE_CONFIG_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/trainscopeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/trainscopeConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/trainscopeConfigVersion.cmake
  DESTINATION ${TRAINSCOPE_CONFIG_DIR})
