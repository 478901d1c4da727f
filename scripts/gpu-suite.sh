#!/usr/bin/env bash
# The GPU suite: builds trainscope with CUDA on a machine with an NVIDIA GPU and
# runs everything that needs one (the GPU-labelled C++ tests, the Python tests
# against the machine's own PyTorch, the GPU benchmarks, the comparisons with
# torch.cuda.Event, Nsight Compute and nvidia-smi, the LibTorch example), then
# writes one report: report.txt and report.json (figures and pass/fail).
#
# It needs no network and none of the distribution's -dev packages on the GPU
# machine: what the build needs travels in .gpu-deps/ (Debian packages, fetched
# once on a machine with network and unpacked with dpkg-deb into a private
# prefix). On a cluster node without internet:
#
#   scripts/gpu-suite.sh --fetch         # where apt works: fills .gpu-deps/
#   (copy the repository, .gpu-deps/ included, to the GPU node)
#   scripts/gpu-suite.sh --out DIR       # on the GPU node
#
# What the node must have: a C++17 compiler, CMake >= 3.20, the CUDA toolkit
# (nvcc and the runtime headers; /usr/local/cuda or CUDAToolkit_ROOT), a Python
# >= 3.8 with its headers, pytest and (for the torch checks) PyTorch with CUDA.
# Optional: ncu (Nsight Compute), nsys (Nsight Systems), libdcgm. Everything
# else is in .gpu-deps/. Exit status: 0 when every check passed or was skipped
# for a stated reason, 1 when one failed, 2 on a usage or setup error.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
deps=$repo/.gpu-deps

# Build dependencies (Debian 12 names) and the runtime closure of libcurl,
# which a node may lack; only sonames the node does not have are used.
build_debs=(
  libabsl-dev libabsl20220623 libfmt-dev libfmt9 nlohmann-json3-dev
  libcurl4-openssl-dev libcurl4 libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian pybind11-dev
  libncurses-dev libncurses6 libncursesw6 libtinfo6
)
runtime_debs=(
  libnghttp2-14 libidn2-0 librtmp1 libssh2-1 libpsl5 libgssapi-krb5-2 libldap-2.5-0
  libzstd1 libbrotli1 libunistring2 libgnutls30 libhogweed6 libnettle8 libgmp10 libkrb5-3
  libk5crypto3 libkrb5support0 libsasl2-2 libp11-kit0 libtasn1-6 libkeyutils1 libffi8
  libcom-err2
)

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  cat <<'EOF'
Options:
  --fetch          download the Debian packages into .gpu-deps/ (needs apt and network)
  --out DIR        where the report and logs go (default: build-gpu/suite)
  --build DIR      build directory (default: build-gpu)
  --python PY      the Python to build the module for and test with (default: python3)
  --jobs N         build jobs (default: nproc)
  --targets "T..." build only these targets (default: what every GPU check needs)
  --only LIST      run only these checks, comma-separated: gtests, bench, libtorch,
                   py:FILE (a tests/python file), rest (default: all; a second, short
                   run on a GPU machine after a fix)
  --deadline S     stop starting optional checks after S seconds (default: 540); each
                   check's own timeout ends by then too, and report.txt/report.json are
                   rewritten after each check, so a suite stopped from outside leaves one
EOF
}

fetch() {
  mkdir -p "$deps/debs"
  cd "$deps/debs"
  local failed=()
  for p in "${build_debs[@]}" "${runtime_debs[@]}"; do
    apt-get download "$p" >/dev/null 2>&1 || failed+=("$p")
  done
  if ((${#failed[@]})); then
    echo "gpu-suite: could not download: ${failed[*]} (apt-get update first?)" >&2
    exit 2
  fi
  echo "gpu-suite: $(ls ./*.deb | wc -l) packages in $deps/debs ($(du -sh . | cut -f1))"
}

out=""
build=$repo/build-gpu
python=python3
jobs=$(nproc)
deadline=540
only=""
targets_given=""
while (($#)); do
  case $1 in
    --fetch) fetch; exit 0 ;;
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --deadline) deadline=$2; shift 2 ;;
    --targets) targets_given=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-suite: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
out=${out:-$build/suite}
mkdir -p "$build" "$out"
started=$(date +%s)
log() { echo "gpu-suite [$(($(date +%s) - started))s] $*"; }

# --- dependencies: unpack, and put on the library path only what is missing ---
prefix=$build/deps
if [[ -d $deps/debs ]]; then
  if [[ ! -f $prefix/.unpacked ]]; then
    rm -rf "$prefix"
    mkdir -p "$prefix"
    for f in "$deps"/debs/*.deb; do dpkg-deb -x "$f" "$prefix"; done
    touch "$prefix/.unpacked"
  fi
  runtime=$prefix/runtime-lib
  rm -rf "$runtime"
  mkdir -p "$runtime"
  have=$(ldconfig -p | awk 'NR > 1 {print $1}' | sort -u)
  for f in "$prefix"/usr/lib/x86_64-linux-gnu/*.so.* "$prefix"/lib/x86_64-linux-gnu/*.so.*; do
    [[ -e $f ]] || continue
    name=$(basename "$f")
    # Only sonames (libfoo.so.N), not their fully versioned targets.
    [[ $name =~ ^lib.*\.so\.[0-9]+$ ]] || continue
    grep -qxF "$name" <<<"$have" || ln -sf "$f" "$runtime/$name"
  done
  export LD_LIBRARY_PATH=$runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  log "deps: $(ls "$deps"/debs/*.deb | wc -l) packages unpacked into $prefix;" \
    "$(ls "$runtime" | wc -l) libraries the node lacks on the library path"
  prefix_path="$prefix/usr"
else
  log "deps: no $deps/debs (scripts/gpu-suite.sh --fetch): using the system's packages"
  prefix_path=""
fi

# --- configure and build ------------------------------------------------------
py=$(command -v "$python" || true)
[[ -n $py ]] || { echo "gpu-suite: no Python '$python'" >&2; exit 2; }
pybind11_dir=$("$py" -m pybind11 --cmakedir 2>/dev/null || true)
[[ -n $pybind11_dir ]] || pybind11_dir=$prefix/usr/lib/cmake/pybind11
cuda_root=${CUDAToolkit_ROOT:-/usr/local/cuda}
if [[ ! -x $cuda_root/bin/nvcc ]] && command -v nvcc >/dev/null; then
  cuda_root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
fi
# Without the interpreter's headers there is no Python module to build: the C++
# checks still run and the Python ones are skipped with the reason.
py_include=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null || true)
build_python=ON
python_missing=""
if [[ ! -f $py_include/Python.h ]]; then
  build_python=OFF
  python_missing="no Python.h in '$py_include' ($py): the Python module cannot be built here"
  log "$python_missing"
fi
log "python $("$py" -c 'import sys; print(sys.version.split()[0])') ($py), pybind11 $pybind11_dir"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake_args=(
  -S "$repo" -B "$build/tree" "${generator[@]}"
  -DCMAKE_BUILD_TYPE=Release -DTRAINSCOPE_WITH_CUDA=ON -DCUDAToolkit_ROOT="$cuda_root"
  -DTRAINSCOPE_BUILD_PYTHON=$build_python -DPython_EXECUTABLE="$py" -Dpybind11_DIR="$pybind11_dir"
  -DCMAKE_PREFIX_PATH="$prefix_path" -DCMAKE_POLICY_VERSION_MINIMUM=3.5
)
set +e
cmake "${cmake_args[@]}" >"$out/configure.log" 2>&1
rc=$?
# What the GPU checks need is built first (the library, the Python module, the
# CLI, the GPU tests and the timer benchmark); the rest of the tree is built by
# the optional full pass (gpu_suite.py) when the deadline leaves time for it.
targets=(trainscope_cli timer_bench)
[[ $build_python == ON ]] && targets+=(_core)
for t in "$repo"/tests/*/gpu_*_test.cpp; do targets+=("$(basename "$t" .cpp)"); done
[[ -n $targets_given ]] && read -r -a targets <<<"$targets_given"
if ((rc == 0)); then
  log "configured; building ${targets[*]} with $jobs jobs"
  cmake --build "$build/tree" -j"$jobs" --target "${targets[@]}" >"$out/build.log" 2>&1
  rc=$?
fi
set -e
if ((rc != 0)); then
  log "build FAILED (logs: $out/configure.log, $out/build.log):"
  tail -40 "$out/build.log" 2>/dev/null || tail -40 "$out/configure.log"
  exit 2
fi
log "built"

# --- the checks and the report ------------------------------------------------
export TRAINSCOPE_GPU_SUITE_STARTED=$started
set +e
"$py" "$repo/scripts/gpu_suite.py" --repo "$repo" --build "$build/tree" --out "$out" \
  --python "$py" --jobs "$jobs" --deadline "$deadline" --no-python-reason "$python_missing" --only "$only" \
  --cmake-arg=-DCMAKE_PREFIX_PATH="$prefix_path" --cmake-arg=-Dpybind11_DIR="$pybind11_dir" \
  --cmake-arg=-DCUDAToolkit_ROOT="$cuda_root" --cmake-arg=-DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
  "${generator[@]/#/--cmake-arg=}"
rc=$?
set -e
exit $rc
