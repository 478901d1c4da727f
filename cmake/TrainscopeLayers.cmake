# The library is built room by room, lowest layer first. Each room (a folder
# with the same name under include/trainscope/, src/ and tests/) is an object
# library that is compiled against a private include tree holding
#
#   include/trainscope/<room>  the public headers of its own room and of the
#                              rooms below it (never above), and
#   src/<room>, src/common     its own internal headers and the shared
#                              infrastructure (files, CSV, markup, progress line),
#
# so an upward #include, or an #include of another room's internal header, is
# a compile error:
#
#   fatal error: trainscope/export/exporter.hpp: No such file or directory
#
# from a timing file (docs/architecture.md draws the layers). A room nested in
# another (export/mlflow) is a layer of its own: its parent's tree leaves it out.
# tests/layers/ checks these promises with try_compile (ctest layers_check).
set(TRAINSCOPE_LAYERS
  common          # errors, clocks, file I/O, CSV: no trainscope dependency
  stats           # TimeStats, moments, quantile sketch, sample series, summaries and their formats
  timing          # keys, Timer, CPUGPUTimer, GPU event sources, NVTX, the sample ring
  export          # Exporter, ExportPipeline, run records, stdout/file/Perfetto/W&B exporters
  export/mlflow   # MLflow REST client and the run-directory syncer (reads a RunSource)
  hardware        # HardwareSource, Sampler
  hardware/host   # /proc and /sys sources, the process tree
  hardware/gpu    # NVML and DCGM sources
  run             # the run store (writer, reader, format) and Run
  steps           # a run's steps (periods, phases, data wait, key sums) and host load, derived once
  launch          # trainscope run: spawn, environment, profilers, sampling
  scaling         # scaling models (Extra-P inputs, modelers, bands, views, plots)
  sweep           # trainscope sweep: plans (radT CSV/YAML, Furcate JSON, grids), scheduler
  stalls          # trainscope stalls: data-wait shares, page cache, differential analysis, what-ifs
  diagnosis       # trainscope diagnose: a run's step phases and labels, live (the follower)
  top             # trainscope top: what to follow, a sweep's jobs, the lines drawn (TopSession)
  prometheus      # the Prometheus endpoint: exposition of the follower's state, HTTP server (cpp-httplib)
  compare         # trainscope compare: is B faster than A (runs, sweeps, baselines; stats/compare for the method)
  report          # trainscope report: one self-contained HTML page for runs, sweeps, scaling
)

# Internal headers (paths under src/) that rooms above their own may still
# include, on purpose: a room's private API used by another room. Empty: what
# one room needs of another is public API (docs/architecture.md, "Where a piece
# of code goes"). An entry needs its user and reason beside it; a header here is
# seen by every room above its own (never below). ctest layers_check follows it.
set(TRAINSCOPE_SHARED_INTERNAL_HEADERS)

set(TRAINSCOPE_LAYER_ROOT "${CMAKE_CURRENT_BINARY_DIR}/trainscope-layers")
set(_ts_layer_root "${TRAINSCOPE_LAYER_ROOT}")
file(REMOVE_RECURSE "${_ts_layer_root}")

# Links into `dst` every entry of `src` except subfolders that are rooms themselves.
function(_ts_link_room src dst)
  file(MAKE_DIRECTORY "${dst}")
  file(GLOB entries CONFIGURE_DEPENDS LIST_DIRECTORIES true "${src}/*")
  foreach(entry IN LISTS entries)
    get_filename_component(name "${entry}" NAME)
    file(RELATIVE_PATH rel "${ARGV2}" "${entry}")
    if(IS_DIRECTORY "${entry}" AND rel IN_LIST TRAINSCOPE_LAYERS)
      continue()
    endif()
    file(CREATE_LINK "${entry}" "${dst}/${name}" SYMBOLIC)
  endforeach()
endfunction()

include(${CMAKE_CURRENT_LIST_DIR}/TrainscopeRoomOwner.cmake)

foreach(header IN LISTS TRAINSCOPE_SHARED_INTERNAL_HEADERS)
  trainscope_owner_room("${header}" owner)
  if(owner STREQUAL "" OR NOT EXISTS "${PROJECT_SOURCE_DIR}/src/${header}")
    message(FATAL_ERROR "TRAINSCOPE_SHARED_INTERNAL_HEADERS: src/${header} is no header of a room")
  endif()
endforeach()

set(TRAINSCOPE_LAYER_TARGETS "")
set(_ts_allowed "")
foreach(layer IN LISTS TRAINSCOPE_LAYERS)
  list(APPEND _ts_allowed ${layer})
  string(REPLACE "/" "_" id "${layer}")
  set(tree "${_ts_layer_root}/${id}")
  file(MAKE_DIRECTORY "${tree}/include/trainscope" "${tree}/src")
  file(CREATE_LINK "${PROJECT_SOURCE_DIR}/include/trainscope/version.hpp"
       "${tree}/include/trainscope/version.hpp" SYMBOLIC)
  # Public headers: this room's and those of every room below it.
  foreach(room IN LISTS _ts_allowed)
    if(IS_DIRECTORY "${PROJECT_SOURCE_DIR}/include/trainscope/${room}")
      _ts_link_room("${PROJECT_SOURCE_DIR}/include/trainscope/${room}"
                    "${tree}/include/trainscope/${room}" "${PROJECT_SOURCE_DIR}/include/trainscope")
    endif()
  endforeach()
  # Internal headers: this room's own, the shared infrastructure of src/common,
  # and the allowlisted headers of rooms below it.
  foreach(room IN ITEMS ${layer} common)
    if(IS_DIRECTORY "${PROJECT_SOURCE_DIR}/src/${room}" AND NOT IS_DIRECTORY "${tree}/src/${room}")
      _ts_link_room("${PROJECT_SOURCE_DIR}/src/${room}" "${tree}/src/${room}"
                    "${PROJECT_SOURCE_DIR}/src")
    endif()
  endforeach()
  foreach(header IN LISTS TRAINSCOPE_SHARED_INTERNAL_HEADERS)
    trainscope_owner_room("${header}" owner)
    if(NOT owner STREQUAL layer AND owner IN_LIST _ts_allowed)
      get_filename_component(dir "${tree}/src/${header}" DIRECTORY)
      file(MAKE_DIRECTORY "${dir}")
      file(CREATE_LINK "${PROJECT_SOURCE_DIR}/src/${header}" "${tree}/src/${header}" SYMBOLIC)
    endif()
  endforeach()

  file(GLOB sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/src/${layer}/*.cpp")
  if(NOT sources)
    continue()  # a room of headers only
  endif()
  set(target trainscope_${id})
  add_library(${target} OBJECT ${sources})
  list(APPEND TRAINSCOPE_LAYER_TARGETS ${target})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(TRAINSCOPE_UNITY_BUILD)
    # One unit per room (CMakeLists.txt, TRAINSCOPE_UNITY_BUILD): a room's files share no
    # file-local name (anonymous namespaces included), and a room's namespace has no
    # `detail` of its own where a unit names trainscope::detail unqualified.
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
  endif()
  target_compile_features(${target} PRIVATE cxx_std_17)
  target_include_directories(${target} PRIVATE "${tree}/include" "${tree}/src")
  target_compile_options(${target} PRIVATE
    $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wno-pedantic>)
  # Include paths and definitions of the dependencies only (no linking here).
  target_link_libraries(${target} PRIVATE ${TRAINSCOPE_LAYER_DEPENDENCIES})
  if(TRAINSCOPE_HAVE_CUDA)
    target_compile_definitions(${target} PRIVATE TRAINSCOPE_HAVE_CUDA=1)
  endif()
  if(TRAINSCOPE_HAVE_NVTX)
    target_compile_definitions(${target} PRIVATE TRAINSCOPE_HAVE_NVTX=1)
    target_include_directories(${target} SYSTEM PRIVATE "${TRAINSCOPE_NVTX_INCLUDE_DIR}")
  endif()
endforeach()

# The Prometheus room serves HTTP with cpp-httplib (cmake/TrainscopeDependencies.cmake).
if(TARGET trainscope_prometheus AND TRAINSCOPE_HAVE_HTTPLIB)
  target_link_libraries(trainscope_prometheus PRIVATE ${TRAINSCOPE_HTTPLIB_TARGET})
  target_compile_definitions(trainscope_prometheus PRIVATE TRAINSCOPE_HAVE_HTTPLIB=1)
endif()
