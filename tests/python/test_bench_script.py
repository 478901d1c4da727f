"""bench/python_overhead.py keeps running (tiny sizes; no timing is asserted)."""

import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "python_overhead.py"


@pytest.mark.skipif(not SCRIPT.exists(), reason="runs from a repository checkout")
def test_overhead_script_prints_its_table(run_python):
    result = run_python(SCRIPT, "--iterations", 2000, "--repeats", 2, "--stats-samples", 500)
    assert result.returncode == 0, result.stderr
    rows = {line.split("  ")[0] for line in result.stdout.splitlines()}
    for row in ("2x time.perf_counter()", "Deep500 Timer start+end (Python)",
                "trainscope Timer start+end", "trainscope CPUGPUTimer start+end",
                "Deep500 (statistics module)", "trainscope"):
        assert row in rows, result.stdout


READ_RUN_SCRIPT = SCRIPT.parent / "read_run_bench.py"


@pytest.mark.skipif(not READ_RUN_SCRIPT.exists(), reason="runs from a repository checkout")
def test_read_run_bench_prints_the_ratio(run_python):
    pytest.importorskip("pandas")
    result = run_python(READ_RUN_SCRIPT, "--rows", 20000, "--repeats", 1)
    assert result.returncode == 0, result.stderr
    assert "pandas.read_csv" in result.stdout and "trainscope.read_run().regions" in result.stdout
    assert "ratio read_run / read_csv:" in result.stdout, result.stdout
