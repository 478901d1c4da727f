"""trainscope.start_run & co: the run directory as a user reads it."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

import trainscope
from run_files import rows as _rows



def _rank(run_dir, rank=0):
    with open(os.path.join(run_dir, f"rank-{rank}.json"), encoding="utf-8") as f:
        return json.load(f)


pytestmark = pytest.mark.usefixtures("no_inherited_run")


def test_a_run_records_regions_metrics_params_and_artifacts(tmp_path):
    artifact = tmp_path / "model.txt"
    artifact.write_text("weights")
    with trainscope.start_run(run_name="baseline", params={"lr": 0.1}, root=tmp_path) as run:
        tmr = trainscope.Timer()  # attached to the active run
        for step in range(5):
            tmr.start(trainscope.TimeType.BATCH)
            tmr.end(trainscope.TimeType.BATCH)
            trainscope.log_metric("loss", 1.0 / (step + 1), step=step)
        trainscope.log_param("batch_size", 32)
        trainscope.set_tag("team", "perf")
        trainscope.log_artifact(artifact)
    assert trainscope.active_run() is None
    with open(os.path.join(run.dir, "run.json"), encoding="utf-8") as f:
        info = json.load(f)
    assert info["name"] == "baseline"
    assert info["params"] == {"lr": "0.1", "batch_size": "32"}
    assert info["tags"]["team"] == "perf"
    assert _rank(run.dir)["status"] == "FINISHED"
    regions = _rows(os.path.join(run.dir, "regions-0.csv"))
    assert [r["key"] for r in regions] == ["BATCH"] * 5
    assert [int(r["step"]) for r in regions] == list(range(5))
    durations = sorted(int(r["duration_ns"]) * 1e-9 for r in regions)
    assert durations == pytest.approx(sorted(tmr.get_time(trainscope.TimeType.BATCH)), abs=1e-9)
    metrics = _rows(os.path.join(run.dir, "metrics-0.csv"))
    assert [(m["key"], float(m["value"]), int(m["step"])) for m in metrics] == [
        ("loss", 1.0 / (s + 1), s) for s in range(5)]
    with open(os.path.join(run.dir, "summary-0.json"), encoding="utf-8") as f:
        summary = json.load(f)
    (entry,) = summary["entries"]
    assert entry["key"] == "BATCH" and entry["count"] == 5
    assert (tmp_path / run.id / "artifacts" / "model.txt").read_text() == "weights"


def test_the_store_loads_into_pandas_in_one_line(tmp_path):
    pd = pytest.importorskip("pandas")
    with trainscope.start_run(root=tmp_path) as run:
        for step in range(3):
            trainscope.log_metric("acc", 0.5 + step / 10, step=step)
    frame = pd.read_csv(os.path.join(run.dir, "metrics-0.csv"))
    assert list(frame["value"]) == pytest.approx([0.5, 0.6, 0.7])
    assert list(frame.columns) == ["key", "value", "step", "timestamp_ms", "rank"]


def test_an_exception_ends_the_run_failed_and_ctrl_c_killed(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with trainscope.start_run(root=tmp_path) as failed:
            trainscope.log_metric("x", 1.0)
            1 / 0  # pylint: disable=pointless-statement
    assert _rank(failed.dir)["status"] == "FAILED"
    assert len(_rows(os.path.join(failed.dir, "metrics-0.csv"))) == 1
    with pytest.raises(KeyboardInterrupt):
        with trainscope.start_run(root=tmp_path) as killed:
            raise KeyboardInterrupt
    assert _rank(killed.dir)["status"] == "KILLED"


def test_an_error_raised_while_ctrl_c_is_handled_ends_the_run_killed(tmp_path):
    """Ctrl-C in a DataLoader loop kills its workers too: their SIGCHLD raises "DataLoader
    worker ... exited unexpectedly" over the KeyboardInterrupt (and a DDP peer that died of
    the same signal fails this rank's collective). The run was interrupted: KILLED, in a
    `with start_run()` and in the implicit run a timer joins under `trainscope run`."""
    with pytest.raises(RuntimeError):
        with trainscope.start_run(root=tmp_path) as explicit:
            try:
                raise KeyboardInterrupt
            finally:
                raise RuntimeError("DataLoader worker (pid 1234) exited unexpectedly")
    assert _rank(explicit.dir)["status"] == "KILLED"
    with pytest.raises(RuntimeError):
        with trainscope.start_run(root=tmp_path) as caused:
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as interrupt:
                raise RuntimeError("peer closed") from interrupt
    assert _rank(caused.dir)["status"] == "KILLED"
    with pytest.raises(RuntimeError):
        with trainscope.start_run(root=tmp_path) as failed:
            try:
                raise ValueError("not an interrupt")
            finally:
                raise RuntimeError("second error")
    assert _rank(failed.dir)["status"] == "FAILED"
    implicit = tmp_path / "implicit"
    child = _python("""
        import trainscope
        tmr = trainscope.Timer()
        with tmr.scope("BATCH"):
            pass
        try:
            raise KeyboardInterrupt
        finally:
            raise RuntimeError("DataLoader worker (pid 1234) exited unexpectedly")
    """, env={"TRAINSCOPE_RUN_DIR": str(implicit)})
    child.communicate(timeout=60)
    assert child.returncode == 1
    assert _rank(implicit)["status"] == "KILLED"


def test_bad_input_is_a_clear_error_and_loses_nothing(tmp_path):
    with trainscope.start_run(root=tmp_path, params={"lr": 0.1}) as run:
        trainscope.log_metric("ok", 1.0, step=0)
        with pytest.raises(ValueError, match="bad key!"):
            trainscope.log_metric("bad key!", 1.0)
        named = r"log_metric\('loss'\): the "
        with pytest.raises(ValueError, match=named + "value 'abc' is not a number"):
            trainscope.log_metric("loss", "abc")
        with pytest.raises(TypeError, match=named + "value None is not a number"):
            trainscope.log_metric("loss", None)
        with pytest.raises(TypeError, match=named + "step 'x' is not an integer"):
            trainscope.log_metric("loss", 1.0, step="x")
        with pytest.raises(ValueError, match="nan_metric"):
            trainscope.log_metric("nan_metric", float("nan"))
        with pytest.raises(ValueError, match="lr"):
            trainscope.log_param("lr", 0.2)  # params are write-once
        with pytest.raises(ValueError, match="long_param"):
            trainscope.log_param("long_param", "x" * 7000)
        with pytest.raises(RuntimeError, match="already active"):
            trainscope.start_run(root=tmp_path)
        trainscope.log_metric("ok", 2.0, step=1)
    assert [m["value"] for m in _rows(os.path.join(run.dir, "metrics-0.csv"))] == ["1", "2"]


def test_start_run_joins_the_run_a_timer_already_joined_under_trainscope_run(tmp_path):
    """Under `trainscope run` a Timer built first joins TRAINSCOPE_RUN_DIR's run; a
    `with start_run(...)` after it is that same run (not "already active")."""
    child = _python(f"""
        import trainscope
        with trainscope.start_run(root={str(tmp_path)!r}) as outer:
            pass
        import os
        os.environ["TRAINSCOPE_RUN_DIR"] = outer.dir
        tmr = trainscope.Timer()
        with tmr.scope("BATCH"):
            pass
        with trainscope.start_run(params=dict(lr=0.1), tags=dict(t="x")) as run:
            assert run.dir == outer.dir, (run.dir, outer.dir)
            with tmr.scope("BATCH"):
                pass
        print(run.dir, flush=True)
    """)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    run = trainscope.read_run(out.strip())
    assert run.params == {"lr": "0.1"} and run.tags.get("t") == "x"
    assert (run.regions["key"] == "BATCH").sum() == 2  # the one timed before start_run too
    assert run.status == "FINISHED"


def _python(code, env=None):
    full_env = dict(os.environ, **(env or {}))
    # SIGHUP as a terminal gives it, even when this suite runs under nohup.
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                            stdout=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_ends_the_run_killed_with_everything_logged_before_it(tmp_path, signum):
    child = _python(f"""
        import sys, time, trainscope
        run = trainscope.start_run(root={str(tmp_path)!r}, flush_interval=60)
        print(run.dir, flush=True)
        for step in range(100):
            trainscope.log_metric("loss", float(step), step=step)
        print("logged", flush=True)
        time.sleep(60)
    """)
    run_dir = child.stdout.readline().strip()
    assert child.stdout.readline().strip() == "logged"
    child.send_signal(signum)
    assert child.wait(timeout=60) == -signum
    # The flush interval is 60 s: only the signal's path can have written these.
    assert _rank(run_dir)["status"] == "KILLED"
    assert len(_rows(os.path.join(run_dir, "metrics-0.csv"))) == 100


def test_child_processes_and_ranks_attach_through_the_environment(tmp_path):
    with trainscope.start_run(root=tmp_path, run_name="job") as run:
        assert os.environ["TRAINSCOPE_RUN_DIR"] == run.dir
        child = _python("""
            import trainscope
            with trainscope.start_run() as run:
                trainscope.log_metric("loss", 3.0, step=7)
                print(run.dir, run.rank, flush=True)
        """, env={"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"})
        out, _ = child.communicate(timeout=60)
        assert child.returncode == 0
        trainscope.log_metric("loss", 1.0, step=7)
    child_dir, child_rank = out.split()
    assert child_dir == run.dir and child_rank == "1"
    rank1 = _rows(os.path.join(run.dir, "metrics-1.csv"))
    assert [(m["key"], m["value"], m["rank"]) for m in rank1] == [("loss", "3", "1")]
    assert _rank(run.dir, 1)["world_size"] == 2
    with open(os.path.join(run.dir, "run.json"), encoding="utf-8") as f:
        assert json.load(f)["name"] == "job"  # rank 1 did not clobber it


def test_wandb_and_perfetto_exporters_can_be_switched_on(tmp_path):
    trace = tmp_path / "trace-{rank}.json"
    with trainscope.start_run(root=tmp_path, run_name="exp", wandb=True,
                              wandb_dir=tmp_path / "wandb", perfetto=trace):
        tmr = trainscope.Timer()
        for step in range(3):
            tmr.start(trainscope.TimeType.BATCH)
            tmr.end(trainscope.TimeType.BATCH)
            trainscope.log_metric("loss", float(step), step=step)
    with open(tmp_path / "trace-0.json", encoding="utf-8") as f:
        events = json.load(f)
    slices = [e for e in events if e.get("ph") == "X"]
    assert [e["name"] for e in slices] == ["BATCH"] * 3
    offline = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(offline) == 1 and offline[0].stat().st_size > 7
