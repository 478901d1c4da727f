"""bench/model_vs_extrap.py and bench/model_extrapolation.py keep running (tiny sizes; no
timing or accuracy is asserted).

Needs TRAINSCOPE_CLI; the speed comparison also needs Extra-P (TRAINSCOPE_EXTRAP_PYTHON, the
python of a venv with tests/python/requirements-extrap.txt; its `extrap` command lies beside it).
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
CLI = os.environ.get("TRAINSCOPE_CLI")
EXTRAP_PYTHON = os.environ.get("TRAINSCOPE_EXTRAP_PYTHON")

pytestmark = [
    pytest.mark.skipif(not (BENCH / "model_vs_extrap.py").exists(), reason="runs from a repository checkout"),
    pytest.mark.skipif(not CLI, reason="set TRAINSCOPE_CLI to the trainscope binary"),
]


def _run(*args):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=600,
                          check=False, stdin=subprocess.DEVNULL)


@pytest.mark.skipif(not EXTRAP_PYTHON, reason="set TRAINSCOPE_EXTRAP_PYTHON to the python of Extra-P's venv")
def test_speed_bench_prints_its_table():
    extrap = pathlib.Path(EXTRAP_PYTHON).parent / "extrap"
    result = _run(BENCH / "model_vs_extrap.py", "--quick", "--extrap", extrap, "--trainscope", CLI)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("1 param, 2 metrics") for line in lines), result.stdout
    assert any(line.startswith("2 params, 5x5 grid x 5 reps, 2 metrics") for line in lines), result.stdout
    assert "extrap / ts-extrap" in result.stdout


def test_extrapolation_bench_runs_without_extrap():
    result = _run(BENCH / "model_extrapolation.py", "--quick", "--trainscope", CLI)
    assert result.returncode == 0, result.stderr
    for mode in ("trainscope", "trainscope --modeler extrap"):
        for family in ("weak", "strong", "constant", "near-constant", "additive-2p"):
            assert re.search(rf"^{mode}\s+{family}\s+[0-9.]+%", result.stdout, re.M), result.stdout
    # the per family and noise level table: a row per family and level, a column per mode
    table = result.stdout.split("median held-out error per family and noise level", 1)[1]
    for family in ("weak", "strong", "constant", "near-constant", "additive-2p"):
        for noise in ("1%", "3%", "15%"):
            assert re.search(rf"^{family}\s+{noise}\s+[0-9.]+%\s+[0-9.]+%\s*$", table, re.M), table
    assert "Extra-P" not in result.stdout


@pytest.mark.skipif(not EXTRAP_PYTHON, reason="set TRAINSCOPE_EXTRAP_PYTHON to the python of Extra-P's venv")
def test_extrapolation_bench_compares_with_extrap():
    result = _run(BENCH / "model_extrapolation.py", "--quick", "--trainscope", CLI, "--extrap", EXTRAP_PYTHON)
    assert result.returncode == 0, result.stderr
    assert "Extra-P 4.2.5" in result.stdout
    header = next(line for line in result.stdout.splitlines() if line.startswith("family"))
    assert "Extra-P, negative exponents" in header and "trainscope" in header, header
