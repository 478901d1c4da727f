"""MLflow's fluent API: log_metric & co start a run on first use, or join the
one trainscope run made (TRAINSCOPE_RUN_DIR); interpreter exit ends it with
the status of how the script ended; timers stream into it."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from run_files import read_json as _json, rows as _rows, trainscope_cli




def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI")}
    env["TRAINSCOPE_RUNS_ROOT"] = str(tmp_path / "runs")
    env.update(extra)
    return env


def _python(tmp_path, code, **env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=_env(tmp_path, **env),
                          capture_output=True, text=True, timeout=120, check=False)


def _only_run(tmp_path):
    runs = os.listdir(tmp_path / "runs")
    assert len(runs) == 1, runs
    return tmp_path / "runs" / runs[0]


def test_log_metric_alone_starts_a_run_that_ends_finished_at_exit(tmp_path):
    done = _python(tmp_path, """
        import trainscope
        trainscope.log_metric("x", 1)
        trainscope.log_param("lr", 0.1)
        assert trainscope.active_run() is not None
    """)
    assert done.returncode == 0, done.stderr
    run = _only_run(tmp_path)
    assert _json(run / "rank-0.json")["status"] == "FINISHED"
    assert _json(run / "run.json")["params"] == {"lr": "0.1"}
    assert [(m["key"], float(m["value"])) for m in _rows(run / "metrics-0.csv")] == [("x", 1.0)]


@pytest.mark.parametrize("ending, status, code", [
    ("raise ValueError('boom')", "FAILED", 1),
    ("raise KeyboardInterrupt", "KILLED", -2),  # Python re-raises SIGINT at exit
    ("import sys; sys.exit(0)", "FINISHED", 0),
])
def test_the_implicit_run_ends_with_how_the_interpreter_ended(tmp_path, ending, status, code):
    done = _python(tmp_path, f"""
        import trainscope
        trainscope.set_tag("phase", "train")
        {ending}
    """)
    assert done.returncode == code, done.stderr
    assert _json(_only_run(tmp_path) / "rank-0.json")["status"] == status


def test_timers_built_before_the_first_call_stream_into_the_run(tmp_path):
    done = _python(tmp_path, """
        import trainscope
        tmr = trainscope.Timer()
        trainscope.log_metric("loss", 0.5)          # starts the run
        for _ in range(3):
            with tmr.scope(trainscope.TimeType.BATCH):
                pass
    """)
    assert done.returncode == 0, done.stderr
    run = _only_run(tmp_path)
    assert [r["key"] for r in _rows(run / "regions-0.csv")] == ["BATCH"] * 3
    summary = _json(run / "summary-0.json")
    assert any(e["key"] == "BATCH" and e["count"] == 3 for e in summary["entries"]), summary


def test_regions_timed_before_the_first_log_metric_are_in_the_run(tmp_path):
    # The loop: the first batch is timed, then its loss logged (which
    # starts the run): all 32 batches are in the run, as in the timer's table,
    # in the order they ran, and the run reads clean.
    done = _python(tmp_path, """
        import time
        import trainscope
        tmr = trainscope.Timer()
        gpu = trainscope.CPUGPUTimer()              # a CPU-only one here: held the same way
        for step in range(32):
            with tmr.scope(trainscope.TimeType.BATCH):
                with gpu.scope(trainscope.TimeType.FORWARD):
                    time.sleep(0.001)
            trainscope.log_metric("loss", 1.0 / (step + 1), step=step)
        print("timer", tmr.get_time_stats(trainscope.TimeType.BATCH).count)
    """)
    assert done.returncode == 0, done.stderr
    assert "timer 32" in done.stdout
    assert "did not fit" not in done.stderr
    run = _only_run(tmp_path)
    rows = _rows(run / "regions-0.csv")
    batch = [r for r in rows if r["key"] == "BATCH"]
    assert len(batch) == 32
    assert len([r for r in rows if r["key"] == "FORWARD"]) == 32
    starts = [int(r["start_unix_ns"]) for r in batch]
    assert starts == sorted(starts)
    import trainscope  # pylint: disable=import-outside-toplevel
    assert trainscope.read_run(str(run)).warnings == []


def test_a_timer_gone_before_the_run_leaves_nothing_in_it(tmp_path):
    # Only the timers that join the run bring what they held: a timer dropped before
    # the run started (a warm-up measured apart) puts no rows into it.
    done = _python(tmp_path, """
        import gc
        import trainscope
        warmup = trainscope.Timer()
        for _ in range(5):
            with warmup.scope(trainscope.TimeType.BATCH):
                pass
        del warmup
        gc.collect()
        tmr = trainscope.Timer()
        for _ in range(3):
            with tmr.scope(trainscope.TimeType.BATCH):
                pass
        trainscope.log_metric("loss", 0.5)
    """)
    assert done.returncode == 0, done.stderr
    rows = _rows(_only_run(tmp_path) / "regions-0.csv")
    assert [r["key"] for r in rows] == ["BATCH"] * 3


def test_under_a_run_directory_calls_and_timers_join_it(tmp_path):
    parent = _python(tmp_path, """
        import trainscope
        run = trainscope.start_run(run_name="job")
        print(run.dir)
        run.end()
    """)
    assert parent.returncode == 0, parent.stderr
    run_dir = parent.stdout.strip()
    done = _python(tmp_path, """
        import trainscope
        tmr = trainscope.Timer()                    # joins TRAINSCOPE_RUN_DIR's run
        for _ in range(2):
            with tmr.scope(trainscope.TimeType.EPOCH):
                pass
        trainscope.log_metric("acc", 0.9)
        assert trainscope.active_run().dir == __import__("os").environ["TRAINSCOPE_RUN_DIR"]
    """, TRAINSCOPE_RUN_DIR=run_dir)
    assert done.returncode == 0, done.stderr
    assert os.listdir(tmp_path / "runs") == [os.path.basename(run_dir)]
    assert [r["key"] for r in _rows(os.path.join(run_dir, "regions-0.csv"))] == ["EPOCH"] * 2
    assert [m["key"] for m in _rows(os.path.join(run_dir, "metrics-0.csv"))] == ["acc"]


def test_under_trainscope_run_a_bare_deep500_script_leaves_its_summary(tmp_path):
    cli = trainscope_cli()
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import trainscope as timer
        tmr = timer.Timer()
        for _ in range(4):
            tmr.start(timer.TimeType.BATCH)
            tmr.end(timer.TimeType.BATCH)
        timer.log_metric("loss", 0.25)
    """))
    done = subprocess.run([cli, "run", "--no-sample", "--root", str(tmp_path / "runs"), "--",
                           sys.executable, str(script)], env=_env(tmp_path), capture_output=True,
                          text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    run = _only_run(tmp_path)
    summaries = [json.loads((run / name).read_text()) for name in os.listdir(run)
                 if name.startswith("summary-")]
    entries = [e for s in summaries for e in s["entries"] if e["key"] == "BATCH"]
    assert entries and entries[0]["count"] == 4, summaries
