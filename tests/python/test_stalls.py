"""Data stalls: the timed loader (`tmr.timed(loader)`) on real PyTorch DataLoaders,
and `trainscope stalls` (DS-Analyzer's differential analysis) on a generated
on-disk dataset whose decode cost is known (a wait per sample, in the loop or the
loader's workers) with a step of known cost (a sleep, as a GPU step leaves the
CPU free). Fetch stalls need a slow device, which CI cannot make: their
arithmetic is tested on recorded timings (tests/stalls/stalls_analysis_test.cpp).

The accuracy checks hold beside other load (CI lands on busy machines; checked
beside a two-core CPU burner): a run's figures are compared exactly with its own
region rows, and a measured share or rate with the truth its own clocks imply,
within bounds that every wrong analysis named in a test's docstring exceeds.
How close they really come, quiet and loaded: bench/stalls_accuracy.py.
"""

import glob
import json
import os
import re
import statistics
import subprocess
import sys

import pytest

from run_files import rows, trainscope_cli

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import trainscope  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "stalls_train.py")
BATCH = 8

pytestmark = pytest.mark.filterwarnings("ignore::trainscope.TrainscopeWarning")


def _loader(workers, **kwargs):
    data = TensorDataset(torch.arange(40, dtype=torch.float32).reshape(20, 2))
    return DataLoader(data, batch_size=4, num_workers=workers, **kwargs)


@pytest.mark.parametrize("workers,options", [(0, {}), (2, {"pin_memory": True}),
                                             (2, {"prefetch_factor": 4})])
def test_the_loop_receives_exactly_what_the_loader_yields(no_inherited_run, workers, options):
    tmr = trainscope.Timer()
    plain = [b[0].tolist() for b in _loader(workers, **options)]
    timed = [b[0].tolist() for b in tmr.timed(_loader(workers, **options))]
    assert timed == plain
    # One IO region per batch (learning that the pass is over is none); 5
    # iterations; 1 pass.
    assert tmr.get_time_stats(trainscope.TimeType.IO).count == 5
    assert tmr.get_time_stats("iteration").count == 5
    assert tmr.get_time_stats("loader_epoch").count == 1


def test_any_iterable_and_a_timed_copy(no_inherited_run):
    tmr = trainscope.CPUGPUTimer()
    assert list(tmr.timed(iter(range(7)))) == list(range(7))
    assert list(tmr.timed([1, 2, 3], key="fetch")) == [1, 2, 3]
    assert tmr.get_time_stats("fetch").count == 3  # one wait per item
    batches = list(tmr.timed(_loader(0), copy_to="cpu"))
    assert len(batches) == 5 and tmr.get_time_stats("h2d").count == 5
    assert len(tmr.timed(_loader(0))) == 5


def test_each_pass_logs_its_loader_wait_share(tmp_path, no_inherited_run):
    with trainscope.start_run(root=str(tmp_path)) as run:
        tmr = trainscope.Timer()
        for _ in range(3):
            for _batch in tmr.timed(_loader(1)):
                pass
    metrics = rows(os.path.join(run.dir, "metrics-0.csv"))
    shares = [m for m in metrics if m["key"] == "stalls/loader_wait_share"]
    assert [int(m["step"]) for m in shares] == [1, 2, 3]
    assert all(0 <= float(m["value"]) <= 1 for m in shares)
    keys = {m["key"] for m in metrics}
    assert {"stalls/input_bound_class", "stalls/wait_p95_ms", "stalls/startup_wait_share"} <= keys
    recorded = trainscope.read_run(run.dir)
    assert recorded.tags.get("trainscope.stalls.batch_size") == "4"
    assert "stalls.batch_size" not in recorded.params  # a tag: the user's params stay theirs


def test_a_pass_a_framework_leaves_open_ends_with_the_run(tmp_path, no_inherited_run):
    # As Lightning's fit: each epoch takes len(loader) batches and never asks for
    # one more, and the last epoch's iterator outlives the run. Every pass is
    # still recorded, the last one when the run ends.
    kept = []
    with trainscope.start_run(root=str(tmp_path)) as run:
        tmr = trainscope.Timer()
        loader = tmr.timed(list(range(8)))
        for _ in range(3):
            batches = iter(loader)
            for _ in range(len(loader)):
                next(batches)
            kept.append(batches)  # neither exhausted nor dropped
    assert tmr.get_time_stats("loader_epoch").count == 3
    assert tmr.get_time_stats("iteration").count == 24
    metrics = rows(os.path.join(run.dir, "metrics-0.csv"))
    batches = [(int(m["step"]), float(m["value"])) for m in metrics
               if m["key"] == "stalls/batches"]
    assert batches == [(1, 8.0), (2, 8.0), (3, 8.0)]
    # The loop may go on after its run ended: nothing raises, nothing is recorded twice.
    assert next(kept[-1], None) is None
    assert tmr.get_time_stats("loader_epoch").count == 3


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("stalls-data")
    for i in range(256):
        (root / f"s{i:04d}.bin").write_bytes(os.urandom(16 * 1024))
    return root


def _stalls(cli, args, command, tmp_path, env=None):
    run_env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    run_env.pop("TRAINSCOPE_RUN_DIR", None)
    run_env.update(env or {})
    return subprocess.run([cli, "stalls", *args, "--", sys.executable, TRAIN, *command],
                          capture_output=True, text=True, timeout=600, env=run_env,
                          cwd=tmp_path, check=False)


def _known_prep_share(workers, prep_s, step_s):
    """The prep stall share the costs imply: per iteration the step takes step_s and
    the loader prep_s per batch (in the loop when workers == 0, else in parallel)."""
    if workers == 0:
        return prep_s / (prep_s + step_s)
    return max(0.0, prep_s - step_s) / max(step_s, prep_s)


def _measured_prep_per_batch(log, workers, warm_run_dir, warmup, batch):
    """Seconds the warm run's loader took per batch, from the decodes' own clocks
    (a busy machine's late wake-ups included). In the loop (no workers): a batch of
    decodes, one after the other. With workers, which stay busy while prep-bound:
    the batches of decodes that finished while the measured iterations ran, over
    their time, so whatever parallelism the workers really got is in it."""
    decodes = []
    for path in glob.glob(str(log / "decode-warm-*.txt")):
        with open(path, encoding="utf-8") as f:
            decodes += [tuple(map(float, line.split())) for line in f if line.strip()]
    assert decodes, "no decode log of the warm run"
    if workers == 0:
        return batch * statistics.mean(end - start for start, end in decodes)
    regions = trainscope.read_run(warm_run_dir).regions
    its = regions[regions["key"] == "iteration"].sort_values("start_unix_ns")
    begin = its["start_unix_ns"].iloc[warmup] * 1e-9
    end = (its["start_unix_ns"].iloc[-1] + its["duration_ns"].iloc[-1]) * 1e-9
    finished = sum(1 for _, done in decodes if begin < done <= end)
    assert finished >= batch, (finished, begin, end)
    return batch * (end - begin) / finished


def _leg_figures(run_dir, warmup, iterations):
    """What docs/stalls.md says a leg's figures are: T, the sum of the N `iteration`
    regions after the W warm-up ones, from its region rows, and the live wait share over
    the same steps (their data wait over their periods: read_run's steps, the steps room's,
    docs/steps.md)."""
    run = trainscope.read_run(run_dir)
    regions = run.regions
    its = regions[regions["key"] == "iteration"].sort_values("start_unix_ns")
    its = its.iloc[warmup:warmup + iterations]
    steps = run.steps[run.steps["rank"] == run.steps["rank"].min()].sort_values("step")
    steps = steps.iloc[warmup:warmup + iterations]
    return its["duration_ns"].sum() * 1e-9, steps["data_wait_s"].sum() / steps["period_s"].sum()


def _check_differential_arithmetic(result, warmup, iterations):
    """The analysis's figures are those of its own runs: each leg's T from its rows
    (the right run in the right slot, W thrown away, N counted), the stalls as
    differences of the right legs over the cold run's time, the live share of the
    cold run over the same iterations. Exact, so a busy machine changes nothing."""
    times, live = {}, {}
    for leg in ("synthetic", "cold", "warm"):
        times[leg], live[leg] = _leg_figures(result["runs"][leg]["run_dir"], warmup, iterations)
        assert result["runs"][leg]["time_s"] == pytest.approx(times[leg], rel=1e-6), leg
        assert result["runs"][leg]["live_wait_share"] == pytest.approx(live[leg], abs=1e-6), leg
    t1, t2, t3 = times["synthetic"], times["cold"], times["warm"]
    diff = result["differential"]
    assert diff["prep_stall_s"] == pytest.approx(max(0.0, t3 - t1), rel=1e-6, abs=1e-9)
    assert diff["fetch_stall_s"] == pytest.approx(max(0.0, t2 - t3), rel=1e-6, abs=1e-9)
    assert diff["prep_share"] == pytest.approx(max(0.0, t3 - t1) / t2, rel=1e-6, abs=1e-9)
    assert diff["fetch_share"] == pytest.approx(max(0.0, t2 - t3) / t2, rel=1e-6, abs=1e-9)
    assert diff["live_wait_share_cold"] == pytest.approx(live["cold"], abs=1e-6)
    samples = iterations * result["batch_size"]
    assert diff["ingestion_rate"] == pytest.approx(samples / t1, rel=1e-6)
    assert diff["prep_rate"] == pytest.approx(samples / t3, rel=1e-6)
    # The analysis's own verdict on the two methods follows its stated 5 points.
    gap = abs(diff["live_wait_share_cold"] - (diff["prep_share"] + diff["fetch_share"]))
    assert diff["methods_agree"] == (gap <= 0.05), diff
    assert bool(diff["reconcile"]) == (not diff["methods_agree"]), diff


# A share the analysis measured against the share the run's own clocks imply: within
# 15 points, which holds beside other load (a two-core CPU burner, other builds and
# test suites on a two-core machine: bursts of it land in one run and not another,
# and the method compares runs), while each wrong analysis named in the tests moves
# the share by 25 points or more. bench/stalls_accuracy.py reports how close they
# really come, quiet and loaded (the goal there: 5 points).
SHARE_BOUND = 0.15


@pytest.fixture(scope="module")
def one_pass_dataset(tmp_path_factory):
    """512 samples of 16 KiB: 128 batches of 4, so W + N + the prefetch stay within
    one pass (no worker restart inside the measured iterations)."""
    root = tmp_path_factory.mktemp("stalls-one-pass")
    for i in range(512):
        (root / f"s{i:04d}.bin").write_bytes(os.urandom(16 * 1024))
    return root


# The decode and the step wait (a sleep: a remote decode, a GPU step) rather than
# spin: a spin's wall time is whatever CPU share other load leaves it, so the share
# built in would drift towards 1 on a busy machine, where a wrong analysis that
# forgets to subtract the step (share 1) could no longer be told from the right one.
# Few long waits: a busy machine wakes each one late by a few ms. The shares built
# in stay 25 points or more from 0, 1 and their complement (the step's share), the
# answers of the wrong analyses: no workers 4 x 25 ms in the loop against a 30 ms
# step (0.77); two workers 4 x 60 ms each, 120 ms a batch together (0.75).
# W = 10 with workers: the batches they prefetched before the first step are used up
# before the measured iterations begin (so they deliver what they prepare).
DIFFERENTIAL = {0: {"batch": 4, "decode_ms": 25.0, "step_ms": 30.0, "warmup": 3},
                2: {"batch": 4, "decode_ms": 60.0, "step_ms": 30.0, "warmup": 10}}


@pytest.mark.parametrize("workers", sorted(DIFFERENTIAL))
def test_differential_prep_stall_matches_the_known_share(one_pass_dataset, tmp_path, workers,
                                                         record_property):
    """The analysis of a loop whose prep and step costs are known (DIFFERENTIAL).

    What a wrong analysis does here, and which assertion catches it: a leg in the
    wrong slot, the warm-up counted, a stall over the wrong run's time or the live
    share of another run or window: the arithmetic (exact); the step not subtracted
    (share 1), the stalls' legs swapped (share 0) or the step's share reported
    (0.23 / 0.25): the known share, 25 points or more away; the synthetic run
    loading data after all (share 0), the same; a live share of the synthetic run
    (0): the live share against the differential one."""
    cli = trainscope_cli()
    dataset = one_pass_dataset
    costs = DIFFERENTIAL[workers]
    batch = costs["batch"]
    log = tmp_path / "decode"
    log.mkdir()
    iterations, warmup = 20, costs["warmup"]
    done = _stalls(cli, ["--dataset", str(dataset), "--iterations", str(iterations), "--warmup",
                         str(warmup), "--dir", str(tmp_path / "analysis"), "--json"],
                   ["--data", str(dataset), "--num_workers", str(workers), "--batch", str(batch),
                    "--decode-ms", str(costs["decode_ms"]), "--step-ms", str(costs["step_ms"]),
                    "--decode", "sleep"],
                   tmp_path, env={"STALLS_TEST_DECODE_LOG": str(log)})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result == json.loads((tmp_path / "analysis" / "stalls.json").read_text())
    assert result["batch_size"] == batch
    _check_differential_arithmetic(result, warmup, iterations)
    # The loader's prep as its decodes measured it, the step as the synthetic run did.
    prep_s = _measured_prep_per_batch(log, workers, result["runs"]["warm"]["run_dir"], warmup,
                                      batch)
    step_s = result["runs"]["synthetic"]["time_s"] / iterations
    known = _known_prep_share(workers, prep_s, step_s)
    # Both as shares of the warm run's time (the known share is of the warm
    # iteration: prep + step in the loop, else the slower of the two). The
    # reported share is of the cold run's, which also holds the fetch stall.
    measured = result["differential"]["prep_stall_s"] / result["runs"]["warm"]["time_s"]
    diff = result["differential"]
    live_gap = diff["live_wait_share_cold"] - (diff["prep_share"] + diff["fetch_share"])
    design = batch * costs["decode_ms"] / 1e3 / max(workers, 1)
    record_property("known_prep_share", known)
    record_property("measured_prep_share", measured)
    record_property("reported_prep_share", diff["prep_share"])
    record_property("design_prep_share",
                    _known_prep_share(workers, design, costs["step_ms"] / 1e3))
    record_property("live_minus_differential", live_gap)
    assert abs(measured - known) <= SHARE_BOUND, (workers, measured, known, prep_s, step_s)
    # The two methods measure the same stall: the live share of the cold run agrees,
    # to what a busy machine leaves of it (the two come from different runs, and a
    # burst of other load in one of them moves it: 20 points seen beside a CPU burner
    # and other builds; the analysis then says so, as checked above). A live share
    # of the wrong run or window is caught exactly by the arithmetic.
    assert abs(live_gap) <= 0.3, diff
    # The runs of one analysis, each FINISHED after exactly W + N iterations.
    for leg in ("synthetic", "cold", "warm", "loader"):
        run = trainscope.read_run(result["runs"][leg]["run_dir"])
        assert run.status == "FINISHED"
        regions = run.regions
        assert (regions["key"] == "iteration").sum() == warmup + iterations
    assert result["runs"]["cold"]["residency"]["resident_share"] < 0.05
    assert result["runs"]["warm"]["residency"]["resident_share"] > 0.95


def test_worker_what_if_predicts_an_unmeasured_worker_count(dataset, tmp_path, record_property):
    """Fit from a warm run with 1 worker, predict 2 workers, then run with 2 and compare.
    The decode waits rather than spins (4 x 10 ms a batch, against a 15 ms step), so
    that 2 workers get what they need on a 2-core machine under other load: both
    counts are prep-bound, 2 workers at twice the rate of one. A wrong fit or
    prediction that does not scale with the workers (or caps them at one core, or at
    the warm run's rate) predicts the 1-worker rate, 50% off; the bound is 25%
    (bench/stalls_accuracy.py reports the real error)."""
    cli = trainscope_cli()
    done = _stalls(cli, ["--dataset", str(dataset), "--iterations", "30", "--warmup", "5",
                         "--vary", "num_workers=1", "--dir", str(tmp_path / "a"), "--json"],
                   ["--data", str(dataset), "--num_workers", "2", "--batch", "4",
                    "--decode-ms", "10", "--step-ms", "15", "--decode", "sleep"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    workers = result["what_if"]["workers"]
    assert workers["fitted_runs"] == 1, workers
    predicted = {p["workers"]: p["samples_per_s"] for p in workers["predicted"]}
    # The warm run of this analysis ran with 2 workers: reality.
    measured = 30 * 4 / result["runs"]["warm"]["time_s"]
    one_worker = 30 * 4 / result["runs"]["warm-num_workers-1"]["time_s"]
    error = abs(predicted[2] - measured) / measured
    record_property("predicted_samples_per_s_2_workers", predicted[2])
    record_property("measured_samples_per_s_2_workers", measured)
    record_property("measured_samples_per_s_1_worker", one_worker)
    record_property("what_if_error", error)
    assert error <= 0.25, (predicted[2], measured)
    # The premise: one worker was prep-bound at about half the rate of two.
    assert predicted[1] == pytest.approx(one_worker, rel=1e-6)
    assert measured > 1.5 * one_worker, (measured, one_worker)


def test_a_run_dir_shows_its_live_breakdown(dataset, tmp_path):
    cli = trainscope_cli()
    run_dir = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("TRAINSCOPE_RUN_DIR", None)
    done = subprocess.run([cli, "run", "--run-dir", str(run_dir), "--no-sample", "--",
                           sys.executable, TRAIN, "--data", str(dataset), "--epochs", "2",
                           "--num_workers", "1"],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    text = subprocess.run([cli, "stalls", str(run_dir)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert text.returncode == 0, text.stderr
    assert "input-bound: highly" in text.stdout, text.stdout
    as_json = json.loads(subprocess.run([cli, "stalls", str(run_dir), "--json"],
                                        capture_output=True, text=True, timeout=60,
                                        check=True).stdout)
    assert [p["pass"] for p in as_json["passes"]] == [1, 2]
    assert as_json["passes"][0]["batches"] == 256 // BATCH
    # A pass's share is its steps' (read_run's steps: the steps room's, as the diagnosis and
    # compare have them), summed over the steps past the warm-up that start in the pass.
    run = trainscope.read_run(str(run_dir))
    steps = run.steps[(run.steps["rank"] == 0) & ~run.steps["warmup"]]
    passes = run.regions[run.regions["key"] == "loader_epoch"].sort_values("start_unix_ns")
    for (start, ns), analysed in zip(zip(passes["start_unix_ns"], passes["duration_ns"]),
                                     as_json["passes"]):
        inside = steps[(steps["start_unix_ns"] >= start) & (steps["start_unix_ns"] < start + ns)]
        assert analysed["data_wait_share"] == pytest.approx(
            inside["data_wait_s"].sum() / inside["period_s"].sum(), abs=1e-9)
    # The loader's own live metric of each pass (its waits, the first batch's too, over the
    # pass's time: docs/stalls.md) is logged per pass.
    metrics = [m for m in rows(run_dir / "metrics-0.csv") if m["key"] == "stalls/loader_wait_share"]
    assert len(metrics) == 2


def test_bad_input_is_a_clear_error(dataset, tmp_path):
    cli = trainscope_cli()
    command = ["--data", str(dataset)]
    missing = _stalls(cli, ["--dataset", str(tmp_path / "nothere")], command, tmp_path)
    assert missing.returncode == 2 and "nothere: no such file or directory" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = _stalls(cli, ["--dataset", str(tmp_path / "empty")], command, tmp_path)
    assert empty.returncode == 2 and "holds no file" in empty.stderr
    short = _stalls(cli, ["--dataset", str(dataset), "--iterations", "3", "--warmup", "5"],
                    command, tmp_path)
    assert short.returncode == 2 and "--iterations 3 is smaller than --warmup 5" in short.stderr
    # A command that never creates the timed loader: an error after the first
    # run, not three silent runs.
    untimed = _stalls(cli, ["--dataset", str(dataset), "--iterations", "5", "--warmup", "1",
                            "--dir", str(tmp_path / "untimed")],
                      command + ["--no-timed-loader", "--epochs", "1"], tmp_path)
    assert untimed.returncode == 1
    assert "the synthetic run recorded no timed loader" in untimed.stderr, untimed.stderr
    assert "tmr.timed(loader)" in untimed.stderr
    assert sorted(os.listdir(tmp_path / "untimed" / "runs")) == ["synthetic"]


@pytest.mark.parametrize("name,value", [("TRAINSCOPE_STALLS_ITERATIONS", "-3"),
                                        ("TRAINSCOPE_STALLS_ITERATIONS", "ten"),
                                        ("TRAINSCOPE_STALLS_WARMUP", "-1"),
                                        ("TRAINSCOPE_STALLS_WARMUP", "2.5"),
                                        ("TRAINSCOPE_STALLS_MODE", "hot")])
def test_a_bad_stalls_variable_is_a_clear_error(no_inherited_run, monkeypatch, name, value):
    """The Python timed loader reads the environment as the C++ one does (one parser):
    a value it cannot use names the variable and the value instead of being ignored."""
    from trainscope import _stalls
    monkeypatch.setattr(_stalls, "_budget", None)
    monkeypatch.setenv("TRAINSCOPE_STALLS_ITERATIONS", "5")
    monkeypatch.setenv("TRAINSCOPE_STALLS_WARMUP", "2")
    monkeypatch.setenv(name, value)
    tmr = trainscope.Timer()
    with pytest.raises(ValueError, match=re.escape(f"{name}='{value}'")):
        iter(tmr.timed([1, 2, 3]))
    # Good values: W + N batches, then the process stops.
    good = {"TRAINSCOPE_STALLS_ITERATIONS": ("1", 2 + 1), "TRAINSCOPE_STALLS_WARMUP": ("1", 5 + 1),
            "TRAINSCOPE_STALLS_MODE": ("synthetic", 5 + 2)}
    monkeypatch.setattr(_stalls, "_budget", None)
    monkeypatch.setenv(name, good[name][0])
    iter(tmr.timed([1, 2, 3]))
    assert _stalls._budget.limit == good[name][1]


def test_python_runs_the_differential_analysis_through_the_same_call(dataset, tmp_path,
                                                                     monkeypatch):
    """trainscope.stalls.run_differential: the call `trainscope stalls --dataset` makes, on a
    tiny real command; each run gets its mode and W + N through its own environment only."""
    from trainscope import stalls
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
    monkeypatch.delenv("TRAINSCOPE_RUN_DIR", raising=False)
    command = [sys.executable, TRAIN, "--data", str(dataset), "--num_workers", "0", "--batch",
               str(BATCH), "--decode-ms", "1", "--step-ms", "2"]
    analysis = stalls.run_differential(command, dataset, iterations=6, warmup=2,
                                       vary={"num_workers": [1]}, dir=tmp_path / "analysis")
    assert analysis.dir == str(tmp_path / "analysis")
    stored = json.loads((tmp_path / "analysis" / "stalls.json").read_text())
    assert analysis.data == stored and analysis["batch_size"] == BATCH
    assert sorted(stored["runs"]) == ["cold", "loader", "synthetic", "warm", "warm-num_workers-1"]
    for leg, result in stored["runs"].items():
        run = trainscope.read_run(result["run_dir"])
        assert run.status == "FINISHED", leg
        assert run.tags["trainscope.stalls.mode"] == ("warm" if leg.startswith("warm") else leg)
        # The loader's facts are tags: a study's params are the user's alone.
        assert not any(k.startswith("stalls.") for k in run.params), run.params
        assert (run.regions["key"] == "iteration").sum() == 8, leg
        assert result["time_s"] > 0
    assert stored["what_if"]["workers"]["key"] == "num_workers"
    assert f"Analysis: {tmp_path / 'analysis' / 'stalls.json'}" in str(analysis)
    assert "Findings:" in analysis.text
    for name in ("TRAINSCOPE_STALLS_MODE", "TRAINSCOPE_STALLS_ITERATIONS",
                 "TRAINSCOPE_STALLS_WARMUP"):
        assert name not in os.environ  # set for the runs only
    with pytest.raises(ValueError, match="iterations 3 is smaller than warmup 5"):
        stalls.run_differential(command, dataset, iterations=3, warmup=5)
    with pytest.raises(ValueError, match="nothere: no such file or directory"):
        stalls.run_differential(command, tmp_path / "nothere")


def test_a_cpp_loop_under_trainscope_stalls(dataset, tmp_path, record_property):
    """examples/stalls_loop.cpp: `trainscope::stalls::timed` reads the same
    environment as Python's timed loader: three runs, each FINISHED after exactly
    W + N iterations, the synthetic one handing out its first batch again; the
    prep stall is the loop's decode share (decode in the loop's thread: 4 x 25 ms
    against a 30 ms step, a sleep each, as a spin's wall time follows other load)."""
    loop = os.environ.get("TRAINSCOPE_STALLS_LOOP")
    if not loop:
        pytest.skip("TRAINSCOPE_STALLS_LOOP (the built examples/stalls_loop) is not set")
    cli = trainscope_cli()
    done = subprocess.run([cli, "stalls", "--dataset", str(dataset), "--iterations", "30",
                           "--warmup", "5", "--dir", str(tmp_path / "a"), "--json", "--",
                           loop, "--data", str(dataset), "--batch", "4", "--decode-ms", "25",
                           "--decode", "sleep", "--step-ms", "30"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    for leg in ("synthetic", "cold", "warm"):
        run = trainscope.read_run(result["runs"][leg]["run_dir"])
        assert run.status == "FINISHED"
        assert (run.regions["key"] == "iteration").sum() == 35
        assert run.tags["trainscope.stalls.batch_size"] == "4"
    assert result["batch_size"] == 4
    _check_differential_arithmetic(result, 5, 30)
    # The decode runs in the loop's thread, inside the loader's next(): the warm run's
    # IO waits are its prep, as the loop's own clock measured it (a busy machine's late
    # wake-ups included); the step as the synthetic run took it; shares of the warm
    # run. A wrong analysis reads 1 (the step not subtracted), 0 (legs swapped) or 0.23
    # (the step's share), 23 points or more from 0.77.
    warm_s, warm_wait_share = _leg_figures(result["runs"]["warm"]["run_dir"], 5, 30)
    prep_s = warm_s * warm_wait_share / 30
    step_s = result["runs"]["synthetic"]["time_s"] / 30
    known = prep_s / (prep_s + step_s)
    measured = result["differential"]["prep_stall_s"] / result["runs"]["warm"]["time_s"]
    record_property("cpp_known_prep_share", known)
    record_property("cpp_measured_prep_share", measured)
    record_property("cpp_design_prep_share", 0.1 / 0.13)
    assert abs(measured - known) <= SHARE_BOUND, (measured, known)


@pytest.fixture(scope="module")
def big_dataset(tmp_path_factory):
    """200 samples of 1 MiB: reading them from the disk costs about as much as the
    loader's other work, so the cached share matters."""
    root = tmp_path_factory.mktemp("stalls-big")
    for i in range(200):
        (root / f"s{i:04d}.bin").write_bytes(os.urandom(1 << 20))
    os.sync()
    return root


def _evict_and_cache(root, every):
    """Evicts every file of `root`, then reads every `every`-th one back in."""
    names = sorted(os.listdir(root))
    for name in names:
        fd = os.open(root / name, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    for name in names[::every]:
        (root / name).read_bytes()


def _cache_prediction_and_half_run(cli, big_dataset, root):
    """One analysis and one run with half the dataset cached: (predicted, measured,
    the cache what-if)."""
    args = ["--data", str(big_dataset), "--num_workers", "1", "--batch", "4", "--decode-ms",
            "0", "--step-ms", "1"]
    root.mkdir()
    done = _stalls(cli, ["--dataset", str(big_dataset), "--iterations", "40", "--warmup", "3",
                         "--dir", str(root / "a"), "--json"], args, root)
    assert done.returncode == 0, done.stderr[-3000:]
    cache = json.loads(done.stdout)["what_if"]["cache"]
    assert cache["disk_rate_from"] == "diskstats", cache
    predicted = {p["cached_share"]: p["samples_per_s"] for p in cache["points"]}[0.5]

    _evict_and_cache(big_dataset, 2)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
               TRAINSCOPE_STALLS_ITERATIONS="40", TRAINSCOPE_STALLS_WARMUP="3",
               TRAINSCOPE_STALLS_MODE="cold")
    env.pop("TRAINSCOPE_RUN_DIR", None)
    half = subprocess.run([cli, "run", "--run-dir", str(root / "half"), "--no-sample", "--",
                           sys.executable, TRAIN, *args],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    assert half.returncode == 0, half.stderr[-2000:]
    regions = trainscope.read_run(str(root / "half")).regions
    iterations = regions[regions["key"] == "iteration"].sort_values("start_unix_ns")
    seconds = iterations["duration_ns"].to_numpy()[3:43].sum() * 1e-9
    return predicted, 40 * 4 / seconds, cache


def test_cache_what_if_predicts_a_half_cached_run(big_dataset, tmp_path, record_property):
    """Predict the throughput with half the dataset in the page cache from the
    cold and warm runs (measured disk and memory rates), then run it so. One loader
    worker: reading then preparing each sample, as the model's fitted overlap must
    find. W + N + prefetch stay within one pass, so no sample is read twice.

    Asserted, exactly, whatever else runs: the model over the analysis's own runs
    (fully cached it gives the warm run's rate, never faster than ingestion; more
    cache is never slower; k >= 1). A model that ignores the warm run, the ingestion
    cap or runs backwards fails it. The prediction against the half-cached run is
    recorded, not asserted: prediction and reality are separate sub-second runs, and
    beside a CPU burner and other suites the error was 80-110% (on a quiet machine
    3-34%), so a bound that holds there would pass a model wrong by a factor;
    bench/stalls_accuracy.py reports it, quiet and loaded."""
    cli = trainscope_cli()
    predicted, measured, cache = _cache_prediction_and_half_run(cli, big_dataset, tmp_path / "1")
    analysis = json.loads((tmp_path / "1" / "a" / "stalls.json").read_text())
    diff = analysis["differential"]
    points = {p["cached_share"]: p["samples_per_s"] for p in cache["points"]}
    assert sorted(points) == pytest.approx([i / 10 for i in range(11)])
    assert points[1.0] == pytest.approx(min(diff["prep_rate"], diff["ingestion_rate"]), rel=1e-9)
    shares = sorted(points)
    assert all(points[c] <= points[d] * (1 + 1e-9) for c, d in zip(shares, shares[1:])), points
    assert cache["overlap_k"] is None or cache["overlap_k"] >= 1, cache
    assert predicted == points[0.5]
    record_property("cache_predicted_half_samples_per_s", predicted)
    record_property("cache_measured_half_samples_per_s", measured)
    record_property("cache_what_if_error", abs(predicted - measured) / measured)
    record_property("cache_overlap_k", cache["overlap_k"])


def _two_processes_sharing(cli, args, env, root):
    """Samples/s two training processes received together while both were past
    their warm-up."""
    procs = [subprocess.Popen([cli, "run", "--run-dir", f"{root}-gpu{i}", "--no-sample",
                               "--", sys.executable, TRAIN, *args],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=env) for i in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
    spans = []
    for i in range(2):
        regions = trainscope.read_run(f"{root}-gpu{i}").regions
        its = regions[regions["key"] == "iteration"].sort_values("start_unix_ns")
        spans.append((its["start_unix_ns"] + its["duration_ns"]).to_numpy()[5:])
    begin = max(ends[0] for ends in spans)
    end = min(ends[-1] for ends in spans)
    assert end - begin > 2e8, "the two processes hardly overlapped"
    batches = sum(((ends > begin) & (ends <= end)).sum() for ends in spans)
    return batches * 4 / ((end - begin) * 1e-9)


def test_gpu_what_if_predicts_two_gpus_sharing_the_loader(dataset, tmp_path, record_property):
    """With k GPUs per node the step's rate scales k-fold and the loader is shared.
    Each "GPU" here is a training process whose step sleeps (a GPU leaves the CPU
    free); each sample's decode holds a lock the whole node shares for 4 ms (a
    device serving one sample at a time), so the node's loader rate is fixed
    whatever the process and worker counts. One process keeps up (the warm run
    cannot show the loader's rate: the loader run measures it), two are
    loader-bound: predict their throughput from the one-process analysis, then run
    two at once and measure it over the time both ran.

    Asserted, exactly, whatever else runs: the loader's rate is the loader run's
    (N B / its time), ingestion the synthetic run's, and k GPUs get min(k x
    ingestion, the loader's rate) for every k. A what-if that does not share the
    loader (k x ingestion), takes the warm run's rate for the loader's, or the
    wrong run, fails it. Two processes against the prediction is recorded, not
    asserted: the device's many short waits queue behind other load (beside a CPU
    burner one process was already loader-bound), so the premise itself does not
    hold on a busy machine; bench/stalls_accuracy.py reports it (goal 15%)."""
    cli = trainscope_cli()
    args = ["--data", str(dataset), "--num_workers", "2", "--batch", "4", "--decode-ms", "4",
            "--decode", "sleep", "--shared-lock", str(tmp_path / "device.lock"), "--step-ms",
            "24"]
    iterations, warmup = 60, 5
    done = _stalls(cli, ["--dataset", str(dataset), "--iterations", str(iterations), "--warmup",
                         str(warmup), "--dir", str(tmp_path / "a"), "--json"], args, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    gpus = result["what_if"]["gpus"]
    assert "measured alone" in gpus["basis"], gpus
    # The loader run: exactly W + N batches taken, none handed to the loop.
    loader_run = trainscope.read_run(result["runs"]["loader"]["run_dir"])
    assert loader_run.status == "FINISHED"
    assert (loader_run.regions["key"] == "iteration").sum() == warmup + iterations
    samples = iterations * 4
    loader_s, _ = _leg_figures(result["runs"]["loader"]["run_dir"], warmup, iterations)
    synthetic_s, _ = _leg_figures(result["runs"]["synthetic"]["run_dir"], warmup, iterations)
    loader_rate, ingestion = samples / loader_s, samples / synthetic_s
    assert gpus["loader_samples_per_s"] == pytest.approx(loader_rate, rel=1e-6)
    assert result["differential"]["ingestion_rate"] == pytest.approx(ingestion, rel=1e-6)
    assert gpus["until_data_bound"] == pytest.approx(loader_rate / ingestion, rel=1e-6)
    predicted = {p["gpus"]: p["samples_per_s"] for p in gpus["predicted"]}
    assert sorted(predicted) == list(range(1, 9))
    for k, rate in predicted.items():
        assert rate == pytest.approx(min(k * ingestion, loader_rate), rel=1e-6), k
    assert predicted[8] < 8 * ingestion  # so the loader's share is in the check

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
               TRAINSCOPE_STALLS_ITERATIONS="80", TRAINSCOPE_STALLS_WARMUP="5",
               TRAINSCOPE_STALLS_MODE="warm")
    env.pop("TRAINSCOPE_RUN_DIR", None)
    measured = _two_processes_sharing(cli, args, env, tmp_path / "two")
    record_property("gpus_until_data_bound", gpus["until_data_bound"])
    record_property("gpu_predicted_2_samples_per_s", predicted[2])
    record_property("gpu_measured_2_samples_per_s", measured)
    record_property("gpu_what_if_error", abs(predicted[2] - measured) / measured)
