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
