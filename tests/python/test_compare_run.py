"""`trainscope compare --run A --run B`: A and B run alternately (A B B A ...) under
`trainscope run` into one directory and compared with the run as the unit, stopping once
decided (compare::run_and_compare, docs/compare-statistics.md). On tiny real commands: an A/A
pair is not called slower or faster with a wide margin, a command twice as slow (a doubled
sleep: little CPU) is called slower and --fail-if-slower exits 1. The sleeps are 20 and 40 ms:
beside a two-core burner a sleep wakes several ms late, which a 4 ms step would not survive
(4 ms read 7.4 ms, 8 ms 10.9 ms, and the runs' medians spread 0.5x to 4x).
"""

import json
import os
import subprocess
import sys

from run_files import trainscope_cli

STEP_JOB = """
import sys, time
import trainscope
with trainscope.start_run():
    timer = trainscope.Timer()
    for step in range(80):
        with timer.scope("BATCH"):
            time.sleep(float(sys.argv[1]))
"""


def compare_run(tmp_path, sleep_a, sleep_b, *flags):
    job = tmp_path / "job.py"
    job.write_text(STEP_JOB, encoding="utf-8")
    env = dict(os.environ)
    env.pop("TRAINSCOPE_RUN_DIR", None)
    command = [trainscope_cli(), "compare",
               "--run", f"{sys.executable} {job} {sleep_a}",
               "--run", f"{sys.executable} {job} {sleep_b}",
               "--root", str(tmp_path / "runs"), "--min-steps", "20", "--json", *flags]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


def test_an_a_a_pair_is_not_called_slower_or_faster(tmp_path):
    done = compare_run(tmp_path, 0.004, 0.004, "--repeat", "3", "--threshold", "50",
                       "--fail-if-slower", "10")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    overall = doc["pairs"][0]["overall"]
    assert overall["verdict"] in ("same", "inconclusive"), overall
    assert overall["unit"] == "runs"
    # A B B A ...: each side's runs in the one directory, A's first.
    runs = sorted(os.listdir(tmp_path / "runs"))
    assert runs[:2] == ["a-1", "a-2"] and "b-1" in runs
    assert "running a-1" in done.stderr.split("running b-1")[0]


def test_a_doubled_step_is_slower_and_fails_the_gate(tmp_path):
    done = compare_run(tmp_path, 0.02, 0.04, "--repeat", "4", "--warmup-runs", "1",
                       "--fail-if-slower", "10")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "slower than the 10% allowed" in done.stderr
    overall = json.loads(done.stdout)["pairs"][0]["overall"]
    assert overall["verdict"] == "slower", overall
    assert 1.3 < overall["ratio"] < 2.4  # (40 + late) / (20 + late)
    # The warm-up runs ran first and are not compared.
    assert (tmp_path / "runs" / "warmup-a-1").is_dir()
    assert not any("warmup" in d for d in json.loads(done.stdout)["pairs"][0]["runs_a"])


def test_bad_use_is_named(tmp_path):
    cli = trainscope_cli()
    one = subprocess.run([cli, "compare", "--run", "true"], capture_output=True, text=True,
                         timeout=60)
    assert one.returncode == 2 and "--run twice" in one.stderr
    bad = compare_run(tmp_path, 0.004, 0.004, "--repeat", "1")
    assert bad.returncode == 2 and "--repeat" in bad.stderr


def test_the_same_from_python(tmp_path):
    import trainscope

    job = tmp_path / "job.py"
    job.write_text(STEP_JOB, encoding="utf-8")
    df = trainscope.compare(run=(f"{sys.executable} {job} 0.02", f"{sys.executable} {job} 0.04"),
                            root=tmp_path / "runs", repeat=3, min_steps=20)
    overall = df.attrs["overall"][0]
    assert overall["verdict"] == "slower" and overall["unit"] == "runs"
    assert df.attrs["order"][:4] == ["A", "B", "B", "A"]
    assert "decided" in df.attrs["stop"] or "all 3" in df.attrs["stop"]
    import pytest
    with pytest.raises(ValueError, match="repeat"):
        trainscope.compare(run=("true", "true"), root=tmp_path / "x", repeat=1)
