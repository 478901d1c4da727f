# Runs one example and checks what it printed and wrote. Used by the example
# tests: cmake -DCHECK_CONFIG=<file> -P run_and_check.cmake, where <file> sets
#   CHECK_COMMAND      the command line (a list)
#   CHECK_WORKDIR      where to run it (created)
#   CHECK_CLEAN        paths removed first, so a stale file cannot pass a check
#   CHECK_STDOUT       regexes that must all match stdout
#   CHECK_STDERR       regexes that must all match stderr
#   CHECK_FILES        pairs <path> <regex>: the file must exist and match
#   CHECK_LINE_COUNTS  pairs <path> <n>: the file must have exactly n lines
# PASS_REGULAR_EXPRESSION cannot do this: it passes on any one regex and
# ignores the exit status.
cmake_minimum_required(VERSION 3.20)

if(NOT CHECK_CONFIG)
  message(FATAL_ERROR "run_and_check.cmake: pass -DCHECK_CONFIG=<file>")
endif()
include("${CHECK_CONFIG}")

set(_failures "")
macro(_fail text)
  string(APPEND _failures "  - ${text}\n")
endmacro()

foreach(path IN LISTS CHECK_CLEAN)
  file(REMOVE_RECURSE "${path}")
endforeach()
file(MAKE_DIRECTORY "${CHECK_WORKDIR}")

string(TIMESTAMP _start "%s")
execute_process(COMMAND ${CHECK_COMMAND}
  WORKING_DIRECTORY "${CHECK_WORKDIR}"
  RESULT_VARIABLE _rc
  OUTPUT_VARIABLE _out
  ERROR_VARIABLE _err)
string(TIMESTAMP _end "%s")
math(EXPR _seconds "${_end} - ${_start}")

# ctest keeps the output, so a failure can be read without rerunning.
message("$ ${CHECK_COMMAND}\n--- stdout ---\n${_out}--- stderr ---\n${_err}--- exit ${_rc} after ~${_seconds} s")

if(NOT _rc STREQUAL "0")
  _fail("exit status ${_rc}, expected 0")
endif()
foreach(regex IN LISTS CHECK_STDOUT)
  if(NOT _out MATCHES "${regex}")
    _fail("stdout does not match: ${regex}")
  endif()
endforeach()
foreach(regex IN LISTS CHECK_STDERR)
  if(NOT _err MATCHES "${regex}")
    _fail("stderr does not match: ${regex}")
  endif()
endforeach()

list(LENGTH CHECK_FILES _n)
if(_n GREATER 0)
  math(EXPR _last "${_n} - 1")
  foreach(i RANGE 0 ${_last} 2)
    math(EXPR j "${i} + 1")
    list(GET CHECK_FILES ${i} path)
    list(GET CHECK_FILES ${j} regex)
    if(NOT EXISTS "${path}")
      _fail("missing file ${path}")
      continue()
    endif()
    file(READ "${path}" contents)
    if(NOT contents MATCHES "${regex}")
      _fail("${path} does not match: ${regex}")
    endif()
  endforeach()
endif()

list(LENGTH CHECK_LINE_COUNTS _n)
if(_n GREATER 0)
  math(EXPR _last "${_n} - 1")
  foreach(i RANGE 0 ${_last} 2)
    math(EXPR j "${i} + 1")
    list(GET CHECK_LINE_COUNTS ${i} path)
    list(GET CHECK_LINE_COUNTS ${j} expected)
    if(NOT EXISTS "${path}")
      _fail("missing file ${path}")
      continue()
    endif()
    file(STRINGS "${path}" lines)
    list(LENGTH lines actual)
    if(NOT actual EQUAL expected)
      _fail("${path} has ${actual} lines, expected ${expected}")
    endif()
  endforeach()
endif()

if(_failures)
  message(FATAL_ERROR "example check failed:\n${_failures}")
endif()
message("example check passed")
