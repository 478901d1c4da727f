# The room (an entry of TRAINSCOPE_LAYERS) that owns `rel`, a path under src/ or
# include/trainscope/: the longest room that is a prefix of its folder ("" for
# none). Shared by cmake/TrainscopeLayers.cmake and the layers_check test.
function(trainscope_owner_room rel out)
  get_filename_component(dir "${rel}" DIRECTORY)
  set(owner "")
  while(NOT dir STREQUAL "")
    if(dir IN_LIST TRAINSCOPE_LAYERS)
      set(owner "${dir}")
      break()
    endif()
    get_filename_component(dir "${dir}" DIRECTORY)
  endwhile()
  set(${out} "${owner}" PARENT_SCOPE)
endfunction()
