# Finds what the library needs. Sets TRAINSCOPE_HAVE_CUDA, TRAINSCOPE_HAVE_NVTX
# and TRAINSCOPE_NVTX_INCLUDE_DIR.
include(GNUInstallDirs)

find_package(absl REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.2 REQUIRED)
# libcurl: the standard C HTTP client, for the MLflow REST exporter.
find_package(CURL REQUIRED)
# yaml-cpp: radT's and W&B's YAML sweep files (src/sweep/). 0.8 names its target
# yaml-cpp::yaml-cpp, 0.7 (Debian 12) yaml-cpp.
find_package(yaml-cpp REQUIRED)
if(TARGET yaml-cpp::yaml-cpp)
  set(TRAINSCOPE_YAML_CPP_TARGET yaml-cpp::yaml-cpp)
else()
  set(TRAINSCOPE_YAML_CPP_TARGET yaml-cpp)
endif()
# CLI11 (header-only): the command-line parser of the `trainscope` tool
# (tools/, TRAINSCOPE_BUILD_CLI), never of the library. Its CMake config gives
# CLI11::CLI11; without one, the header alone.
if(NOT DEFINED TRAINSCOPE_BUILD_CLI OR TRAINSCOPE_BUILD_CLI)
  find_package(CLI11 CONFIG QUIET)
  if(NOT TARGET CLI11::CLI11)
    find_path(TRAINSCOPE_CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
    add_library(CLI11::CLI11 INTERFACE IMPORTED)
    target_include_directories(CLI11::CLI11 INTERFACE ${TRAINSCOPE_CLI11_INCLUDE_DIR})
  endif()
endif()

# cpp-httplib: the HTTP server of the Prometheus endpoint (src/prometheus/,
# `trainscope run --prometheus`, `trainscope serve`); no hand-written HTTP.
# Debian's libcpp-httplib-dev is a compiled library with a pkg-config file (its
# flags: the features it was built with); upstream's httplib.h alone is
# header-only (conda, vcpkg, a copy on CPATH for `pip install`). Without either
# the library builds, and --prometheus says it was built without cpp-httplib.
set(TRAINSCOPE_HAVE_HTTPLIB OFF)
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(TRAINSCOPE_HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
endif()
if(TARGET PkgConfig::TRAINSCOPE_HTTPLIB)
  set(TRAINSCOPE_HAVE_HTTPLIB ON)
  set(TRAINSCOPE_HTTPLIB_PKG ON)
  set(TRAINSCOPE_HTTPLIB_TARGET PkgConfig::TRAINSCOPE_HTTPLIB)
else()
  set(TRAINSCOPE_HTTPLIB_PKG OFF)
  find_path(TRAINSCOPE_HTTPLIB_INCLUDE_DIR httplib.h)
  if(TRAINSCOPE_HTTPLIB_INCLUDE_DIR)
    set(TRAINSCOPE_HAVE_HTTPLIB ON)
    add_library(trainscope_httplib INTERFACE)
    target_include_directories(trainscope_httplib SYSTEM INTERFACE
      $<BUILD_INTERFACE:${TRAINSCOPE_HTTPLIB_INCLUDE_DIR}>)
    set(TRAINSCOPE_HTTPLIB_TARGET $<BUILD_INTERFACE:trainscope_httplib>)
  endif()
endif()

set(TRAINSCOPE_HAVE_CUDA OFF)
if(NOT TRAINSCOPE_WITH_CUDA STREQUAL "OFF")
  if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  if(TRAINSCOPE_WITH_CUDA STREQUAL "ON")
    find_package(CUDAToolkit REQUIRED)
  else()
    find_package(CUDAToolkit QUIET)
  endif()
  if(CUDAToolkit_FOUND)
    set(TRAINSCOPE_HAVE_CUDA ON)
  endif()
endif()

set(TRAINSCOPE_HAVE_NVTX OFF)
if(TRAINSCOPE_WITH_NVTX)
  find_path(TRAINSCOPE_NVTX_INCLUDE_DIR nvtx3/nvToolsExt.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  if(TRAINSCOPE_NVTX_INCLUDE_DIR)
    set(TRAINSCOPE_HAVE_NVTX ON)
  endif()
endif()
