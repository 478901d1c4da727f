#!/usr/bin/env bash
# Sets up, builds and runs the main demo: a C++ training loop timed with
# trainscope on the embedded defaults (no server, no GPU needed), then a small
# PyTorch training under `trainscope run` and its report: one HTML page with
# the whole picture, which opens offline in any browser.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${TRAINSCOPE_BUILD_DIR:-$repo/build}
out=${1:-$repo/trainscope-demo}
bash "$repo/scripts/setup.sh"
# Only what the demo runs (the library, basic_loop, the command and the Python
# module), with Ninja when installed (a build directory keeps the generator it
# was made with) and ccache when installed (CMakeLists.txt). -O2: the demo's
# figures are the same, and -O3 costs about 9% more compile time; each room
# compiled as one unit (TRAINSCOPE_UNITY_BUILD) and the Python module without
# link-time optimisation (pybind11's default, a serial 15 CPU-second link) take
# about a third less (docs/test-suite.md, "The demo").
generator=()
if [[ ! -f $build/CMakeCache.txt ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
began=$SECONDS
cmake -S "$repo" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DTRAINSCOPE_BUILD_TESTS=OFF \
  -DTRAINSCOPE_BUILD_BENCHMARKS=OFF -DTRAINSCOPE_BUILD_EXAMPLES=ON \
  -DTRAINSCOPE_BUILD_PYTHON=ON -DTRAINSCOPE_UNITY_BUILD=ON \
  -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=OFF \
  -DPython_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build "$build" -j"$(nproc)" --target basic_loop trainscope_cli _core
echo "demo: built in $((SECONDS - began)) s"
"$build/examples/basic_loop" "$out"

# A training run recorded by `trainscope run` (regions, hardware, output,
# environment), then its report.
echo
echo "=== a PyTorch training under trainscope run"
run_dir="$out/run"
rm -rf "$run_dir"
PYTHONPATH="$build/python" "$build/tools/trainscope" run --run-dir "$run_dir" --interval 0.2 -- \
  /usr/bin/python3 "$repo/examples/python_train.py" --epochs 4 || true  # the report shows a failure too
"$build/tools/trainscope" report "$run_dir" -o "$out/report.html"
echo
echo "demo: the report of the run is $out/report.html"
echo "      (one self-contained page: open it in any browser, no network needed)"
