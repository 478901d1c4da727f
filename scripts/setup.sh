#!/usr/bin/env bash
# Installs what trainscope builds and tests with, on Debian 12 (bookworm) as
# root. The CUDA toolkit is optional (used from /usr/local/cuda if present).
# Idempotent: a second run only checks.
set -euo pipefail

packages=(
  build-essential cmake git pkg-config
  libfmt-dev libabsl-dev nlohmann-json3-dev libcurl4-openssl-dev libcli11-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev python3-dev python3-venv python3-pip
  python3-torch libtorch-dev
  clang libclang-rt-14-dev clang-format
  sysstat  # iostat, for the radT baseline of bench/sampler_bench.cpp
  slurm-wlm munge  # a one-node Slurm for the tests (scripts/slurm-local.sh)
  libjs-chart.js  # Chart.js, which `trainscope report` embeds in its pages
  chromium  # headless, opens the report pages in tests/python/test_report.py
  libncurses-dev  # `trainscope top` draws with ncurses
  tmux  # runs `trainscope top` in a real terminal in tests/python/test_top.py
  libcpp-httplib-dev  # the HTTP server of the Prometheus endpoint (trainscope run --prometheus)
  prometheus  # scrapes it in tests/python/test_prometheus.py; promtool checks the exposition
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing Debian packages (run as root to install): ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: Debian packages present"
