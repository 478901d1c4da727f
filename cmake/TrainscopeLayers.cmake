# The library is built room by room, lowest layer first. Each room (a folder
# with the same name under include/trainscope/, src/ and tests/) is an object
# library that is compiled against a private include tree holding only its
# own room and the rooms below it, so an upward #include is a compile error:
#
#   fatal error: trainscope/export/exporter.hpp: No such file or directory
#
# from a timing file (docs/architecture.md draws the layers). A room nested in
# another (export/mlflow) is a layer of its own: its parent's tree leaves it out.
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
  launch          # trainscope run: spawn, environment, profilers, sampling
  scaling         # scaling models (Extra-P inputs, modelers, bands, views, plots)
  sweep           # trainscope sweep: plans (radT CSV/YAML, Furcate JSON, grids), scheduler
  stalls          # trainscope stalls: data-wait shares, page cache, differential analysis, what-ifs
  report          # trainscope report: one self-contained HTML page for runs, sweeps, scaling
)

set(_ts_layer_root "${CMAKE_CURRENT_BINARY_DIR}/trainscope-layers")
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

set(TRAINSCOPE_LAYER_TARGETS "")
set(_ts_allowed "")
foreach(layer IN LISTS TRAINSCOPE_LAYERS)
  list(APPEND _ts_allowed ${layer})
  string(REPLACE "/" "_" id "${layer}")
  set(tree "${_ts_layer_root}/${id}")
  file(MAKE_DIRECTORY "${tree}/include/trainscope" "${tree}/src")
  file(CREATE_LINK "${PROJECT_SOURCE_DIR}/include/trainscope/version.hpp"
       "${tree}/include/trainscope/version.hpp" SYMBOLIC)
  foreach(room IN LISTS _ts_allowed)
    foreach(kind include/trainscope src)
      if(IS_DIRECTORY "${PROJECT_SOURCE_DIR}/${kind}/${room}")
        _ts_link_room("${PROJECT_SOURCE_DIR}/${kind}/${room}" "${tree}/${kind}/${room}"
                      "${PROJECT_SOURCE_DIR}/${kind}")
      endif()
    endforeach()
  endforeach()

  file(GLOB sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/src/${layer}/*.cpp")
  if(NOT sources)
    continue()  # a room of headers only
  endif()
  set(target trainscope_${id})
  add_library(${target} OBJECT ${sources})
  list(APPEND TRAINSCOPE_LAYER_TARGETS ${target})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
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
