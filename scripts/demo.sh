#!/usr/bin/env bash
# Sets up, builds and runs the main demo: a C++ training loop timed with
# trainscope on the embedded defaults (no server, no GPU needed).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${TRAINSCOPE_BUILD_DIR:-$repo/build}
bash "$repo/scripts/setup.sh"
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTRAINSCOPE_BUILD_TESTS=OFF \
  -DTRAINSCOPE_BUILD_BENCHMARKS=OFF -DTRAINSCOPE_BUILD_EXAMPLES=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target basic_loop
"$build/examples/basic_loop" "${1:-$repo/trainscope-demo}"
