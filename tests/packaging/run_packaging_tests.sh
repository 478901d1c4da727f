#!/usr/bin/env bash
# Checks that other projects can use trainscope:
#   1. configure, build and install the library to <workdir>/prefix
#      (Release; tests, benchmarks, examples and Python off), or, when
#      TRAINSCOPE_PACKAGING_INSTALL_FROM names a finished build directory (the
#      ctest does: its own build), install that build there instead of building
#      the library once more (saves one library build, about 200 s on 2 cores);
#   2. build and run tests/packaging/consumer with find_package(trainscope)
#      against that prefix;
#   3. build and run the same consumer with add_subdirectory(<repo>).
#
#   run_packaging_tests.sh <repo> <workdir> [extra cmake -D arguments...]
#
# Extra arguments go to every configure step, e.g. -DTRAINSCOPE_WITH_CUDA=OFF
# or -DCMAKE_CXX_COMPILER=clang++. <workdir> is wiped first. Exits non-zero,
# naming the failed step, on any failure.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 <repo> <workdir> [cmake arguments...]" >&2
  exit 2
fi
repo=$(cd "$1" && pwd)
mkdir -p "$2"
work=$(cd "$2" && pwd)
shift 2
extra_args=("$@")
jobs=${TRAINSCOPE_PACKAGING_JOBS:-2}
consumer_src="$repo/tests/packaging/consumer"
prefix="$work/prefix"

fail() {
  echo "packaging test FAILED: $*" >&2
  exit 1
}

# Runs "$@" with its output in $work/<log>.log; prints the log's tail on failure.
run_step() {
  local what=$1 log="$work/$2.log"
  shift 2
  echo "==> $what"
  local start=$SECONDS
  if ! "$@" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    fail "$what (full log: $log)"
  fi
  echo "    ok ($((SECONDS - start)) s)"
}

# Builds and runs the consumer; its output must end with "consumer OK".
check_consumer() {
  local mode=$1
  shift
  local build="$work/consumer-$mode"
  run_step "consumer via $mode: configure" "consumer-$mode-configure" \
    cmake -S "$consumer_src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DTRAINSCOPE_CONSUME="$mode" "$@" "${extra_args[@]}"
  # Only what the consumer needs (with add_subdirectory: the library, not the
  # CLI, tools and tests of the whole tree).
  run_step "consumer via $mode: build" "consumer-$mode-build" \
    cmake --build "$build" -j "$jobs" --target consumer
  run_step "consumer via $mode: run" "consumer-$mode-run" "$build/consumer"
  grep -q "^consumer OK$" "$work/consumer-$mode-run.log" ||
    fail "consumer via $mode did not print 'consumer OK' (see $work/consumer-$mode-run.log)"
}

for dir in build prefix consumer-find_package consumer-add_subdirectory; do
  rm -rf "${work:?}/$dir"
done
rm -f "$work"/*.log

# 1. Install.
library_build=$work/build
if [[ -n ${TRAINSCOPE_PACKAGING_INSTALL_FROM:-} ]]; then
  library_build=$(cd "$TRAINSCOPE_PACKAGING_INSTALL_FROM" && pwd)
  [[ -f $library_build/cmake_install.cmake ]] ||
    fail "TRAINSCOPE_PACKAGING_INSTALL_FROM=$library_build is not a build directory with install rules"
  run_step "library: install $library_build" library-install \
    cmake --install "$library_build" --prefix "$prefix"
else
  run_step "library: configure" library-configure \
    cmake -S "$repo" -B "$library_build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DTRAINSCOPE_INSTALL=ON \
    -DTRAINSCOPE_BUILD_TESTS=OFF -DTRAINSCOPE_BUILD_BENCHMARKS=OFF \
    -DTRAINSCOPE_BUILD_EXAMPLES=OFF -DTRAINSCOPE_BUILD_PYTHON=OFF "${extra_args[@]}"
  run_step "library: build" library-build cmake --build "$library_build" -j "$jobs"
  run_step "library: install" library-install cmake --install "$library_build"
fi

config=$(find "$prefix" -name trainscopeConfig.cmake -print -quit)
[[ -n $config ]] || fail "no trainscopeConfig.cmake under $prefix"
[[ -f $prefix/include/trainscope/trainscope.hpp ]] || fail "headers not installed under $prefix/include"
# An installed package must not point back into the source or build tree.
if grep -rlF -e "$repo" -e "$library_build" "$(dirname "$config")"; then
  fail "installed CMake files above refer to $repo or $library_build"
fi
echo "    package: $config"

# 2. find_package against the prefix only (no user package registry, so a
# stray registration cannot stand in for the installed files).
check_consumer find_package -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF

# 3. add_subdirectory of the source tree, in a Debug build (unoptimized: it
# compiles the library once more, and checks a second configuration).
check_consumer add_subdirectory -DTRAINSCOPE_SOURCE_DIR="$repo" -DCMAKE_BUILD_TYPE=Debug

echo "packaging tests passed"
