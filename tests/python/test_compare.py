"""trainscope.compare and `trainscope compare`: the same call (compare::compare), the
DataFrame, the CLI's table, JSON, baseline and exit codes, on run directories written
by hand (tests/python/run_files.py) and on real jobs under `trainscope run`.
The statistics are tested in tests/stats/compare_test.cpp and the run-level comparison
in tests/compare/compare_runs_test.cpp; bench/compare_calibration.py measures the false
alarms and the power on real PyTorch jobs.
"""

import json
import math
import os
import subprocess
import sys

import pytest

import trainscope
from run_files import trainscope_cli, write_run, write_summary


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """a, a2 (the same job again) and b (25% slower), 600 steps each."""
    root = tmp_path_factory.mktemp("runs")
    keys = (("BATCH", "CPU"), ("FORWARD", "CPU"))
    return {
        "a": write_run(str(root / "a"), keys=keys, rows_per_key=600, seed=1,
                       params={"version": "1"}),
        "a2": write_run(str(root / "a2"), keys=keys, rows_per_key=600, seed=2,
                        params={"version": "1"}),
        "b": write_run(str(root / "b"), keys=keys, rows_per_key=600, seed=3, scale=1.25,
                       params={"version": "2"}),
        "root": str(root),
    }


def wide_enough(row, bare):
    """The run-to-run term widens both sides of the interval around the same ratio."""
    return row["ratio"] == bare["ratio"] and row["low"] < bare["low"] and row["high"] > bare["high"]


def cli(*args):
    return subprocess.run([trainscope_cli(), "compare", *args], capture_output=True, text=True,
                          timeout=120)


def test_python_returns_a_dataframe_of_every_key_with_an_overall_verdict(runs):
    df = trainscope.compare(runs["a"], runs["b"])
    assert set(df["quantity"]) == {"BATCH", "FORWARD", "throughput"}
    batch = df[df["quantity"] == "BATCH"].iloc[0]
    assert batch["verdict"] == "slower"
    assert batch["low"] < 1.25 < batch["high"] or abs(batch["ratio"] - 1.25) < 0.05
    assert batch["unit"] == "steps" and batch["n_a"] > 0
    tp = df[df["quantity"] == "throughput"].iloc[0]
    assert tp["verdict"] == "lower"
    (overall,) = df.attrs["overall"]
    assert overall["basis"] == "step time (BATCH)" and overall["verdict"] == "slower"
    assert trainscope.failing_rows(df, 10) == ["step time (BATCH)"]
    assert trainscope.failing_rows(df, 40) == []
    # 15% noise per step and the 1.5% run-to-run term of one run a side: "same"
    # within +-8%, not within +-2%.
    same = trainscope.compare(runs["a"], runs["a2"], threshold=0.08)
    assert same.attrs["overall"][0]["verdict"] == "same"
    unsure = trainscope.compare(runs["a"], runs["a2"])
    assert unsure.attrs["overall"][0]["verdict"] == "inconclusive"
    assert "runs a side would decide it" in unsure.attrs["overall"][0]["reason"]
    # Without the run-to-run term (run_noise=0), more steps would decide it.
    steps_only = trainscope.compare(runs["a"], runs["a2"], run_noise=0)
    assert steps_only.attrs["overall"][0]["more_a"] > 0
    wide = trainscope.compare(runs["a"], runs["a2"], run_noise=0.05)
    row, bare = (d[d["quantity"] == "BATCH"].iloc[0] for d in (wide, steps_only))
    assert wide_enough(row, bare)
    with pytest.raises(ValueError, match="run_noise"):
        trainscope.compare(runs["a"], runs["a2"], run_noise=-1)
    assert trainscope.failing_rows(same, 0) == []


def test_the_comparison_is_bound_as_typed_classes(runs):
    """_core binds compare::Comparison and its parts as classes (no JSON read in Python)."""
    from trainscope import _core  # pylint: disable=import-outside-toplevel
    request = _core.CompareRequest(a=[runs["a"]], b=[runs["b"]], keys=["BATCH"])
    assert request.a == [runs["a"]] and request.root == ""
    with pytest.raises(TypeError):
        _core.CompareRequest([runs["a"]], [runs["b"]])  # keyword arguments only
    result = _core._compare(request)  # pylint: disable=protected-access
    assert isinstance(result, _core.Comparison) and result.threshold == 0.02
    (pair,) = result.pairs
    assert isinstance(pair.overall, _core.CompareRow)
    assert pair.overall.kind == "region" and pair.overall.verdict == "slower"
    assert pair.overall_basis == "step time (BATCH)" and pair.overall.unit == "steps"
    assert pair.overall.low > 1 and pair.overall.n_a > 0
    df = trainscope.compare(runs["a"], runs["b"], keys=["BATCH"])
    batch = df[df["quantity"] == "BATCH"].iloc[0]
    (row,) = [r for r in pair.rows if r.name == "BATCH"]
    assert (row.verdict, row.ratio, row.low, row.high) == \
        (batch["verdict"], batch["ratio"], batch["low"], batch["high"])
    assert json.loads(result.to_json())["pairs"][0]["overall"]["verdict"] == "slower"


def test_a_key_that_mixes_two_modules_is_a_warning(tmp_path):
    """Issue 37: --auto's FORWARD of a GAN holds both models' calls (the run's tag
    trainscope.auto.callers.FORWARD); compare says its row compares their sum per step."""
    keys = (("BATCH", "CPU"), ("FORWARD", "CPU"))
    a = write_run(str(tmp_path / "a"), keys=keys, rows_per_key=200, seed=1, name="gan-a")
    b = write_run(str(tmp_path / "b"), keys=keys, rows_per_key=200, seed=2, name="gan-b")
    with open(os.path.join(b, "run.json"), encoding="utf-8") as f:
        run = json.load(f)
    run["tags"] = dict(run.get("tags") or {}, **{
        "trainscope.auto.callers.FORWARD": "Generator, Discriminator"})
    with open(os.path.join(b, "run.json"), "w", encoding="utf-8") as f:
        json.dump(run, f)
    done = cli(a, b)
    assert ("warning: FORWARD mixes the calls of Generator, Discriminator in B's run gan-b"
            in done.stdout), done.stdout + done.stderr
    assert "BATCH mixes" not in done.stdout


def test_sampled_layer_backward_keys_are_a_warning(tmp_path):
    """Issue 37: under --auto=layers a layer's backward is timed on one step in K (the tag
    trainscope.auto.layer_backward_every); compare says its rows compare those steps only."""
    keys = (("BATCH", "CPU"), ("layer/0", "CPU"), ("layer/0/backward", "CPU"))
    a = write_run(str(tmp_path / "a"), keys=keys, rows_per_key=200, seed=1, name="layers-a")
    b = write_run(str(tmp_path / "b"), keys=keys, rows_per_key=200, seed=2, name="layers-b")
    with open(os.path.join(b, "run.json"), encoding="utf-8") as f:
        run = json.load(f)
    run["tags"] = dict(run.get("tags") or {}, **{"trainscope.auto.layer_backward_every": "8"})
    with open(os.path.join(b, "run.json"), "w", encoding="utf-8") as f:
        json.dump(run, f)
    done = cli(a, b)
    assert ("warning: layer backward keys (layer/0/backward, ...) are timed on 1 step in 8 in "
            "B's run layers-b" in done.stdout), done.stdout + done.stderr
    assert "in A's run" not in done.stdout
    doc = json.loads(cli(a, b, "--json").stdout)
    assert [r.get("layer_backward_every", 1) for r in doc["b"]["runs"]] == [8]


def test_python_filters_over_a_root_and_keys(runs):
    df = trainscope.compare("params.version = '1'", "params.version = '2'", root=runs["root"],
                            keys=["FORWARD"])
    assert list(df["quantity"]) == ["FORWARD"]
    assert df.attrs["overall"][0]["runs_a"] == sorted([runs["a"], runs["a2"]])
    assert df.iloc[0]["unit"] == "runs"
    with pytest.raises(ValueError, match="bad filter"):
        trainscope.compare("params.version ~ 1", "params.version = '2'", root=runs["root"])
    with pytest.raises(ValueError, match="no such key on both sides: NOPE"):
        trainscope.compare(runs["a"], runs["b"], keys="NOPE")


def test_filters_over_a_sweep_directory_read_its_runs(runs, tmp_path):
    # A sweep directory as --root: its runs are in runs/ (the one resolver every
    # command uses, find_run_dirs); before, no run was found there.
    sweep = tmp_path / "sweep"
    (sweep / "runs").mkdir(parents=True)
    for name in ("a", "b"):
        os.symlink(runs[name], sweep / "runs" / name)
    done = cli("--root", str(sweep), "--a", "params.version = '1'", "--b",
               "params.version = '2'", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["pairs"] and any(r["name"] == "BATCH" for r in doc["pairs"][0]["rows"])


def test_bad_input_names_the_side_and_the_run(runs, tmp_path):
    with pytest.raises(FileNotFoundError, match="B: .*missing: no such run directory"):
        trainscope.compare(runs["a"], str(tmp_path / "missing"))
    empty = write_run(str(tmp_path / "empty"), keys=())
    with pytest.raises(ValueError, match="recorded no regions"):
        trainscope.compare(empty, runs["a"])
    with pytest.raises(TypeError):
        trainscope.compare(3, runs["a"])


def test_cli_table_json_gate_and_exit_codes(runs, tmp_path):
    shown = cli(runs["a"], runs["b"])
    assert shown.returncode == 0, shown.stderr
    assert "overall (step time (BATCH)): slower  +2" in shown.stdout
    assert "95% interval" in shown.stdout
    gated = cli(runs["a"], runs["b"], "--fail-if-slower", "10")
    assert gated.returncode == 1
    assert "slower than the 10% allowed: step time (BATCH)" in gated.stderr
    assert cli(runs["a"], runs["b"], "--fail-if-slower", "40").returncode == 0
    # Noise never fails the gate, even at 0%.
    assert cli(runs["a"], runs["a2"], "--fail-if-slower", "0").returncode == 0
    doc = json.loads(cli(runs["a"], runs["b"], "--json").stdout)
    assert doc["format"] == "trainscope.compare" and "series" not in doc["a"]
    # The CLI and Python give the same numbers (one call).
    df = trainscope.compare(runs["a"], runs["b"])
    batch = next(r for r in doc["pairs"][0]["rows"] if r["name"] == "BATCH")
    assert math.isclose(batch["ratio"], df[df["quantity"] == "BATCH"].iloc[0]["ratio"])
    # Usage and input errors.
    assert cli(runs["a"]).returncode == 2
    assert cli(runs["a"], runs["b"], "--run-noise", "-1").returncode == 2
    no_noise = json.loads(cli(runs["a"], runs["b"], "--run-noise", "0", "--json").stdout)
    bare = next(r for r in no_noise["pairs"][0]["rows"] if r["name"] == "BATCH")
    assert bare["ratio"] == batch["ratio"] and bare["low"] > batch["low"]
    missing = cli(runs["a"], str(tmp_path / "missing"))
    assert missing.returncode == 3 and "no such run directory" in missing.stderr
    assert missing.stdout == ""


def test_a_saved_comparison_is_a_baseline(runs, tmp_path):
    ref = str(tmp_path / "ref.json")
    saved = cli(runs["a"], runs["b"], "--save", ref, "--json")
    assert saved.returncode == 0, saved.stderr
    with open(ref, encoding="utf-8") as f:
        assert "series" in json.load(f)["b"]
    # ref.json's B side is b: b against itself is the same; ref.json:a is a.
    again = cli(ref, runs["b"], "--fail-if-slower", "0", "--threshold", "5")
    assert again.returncode == 0 and "overall (step time (BATCH)): same" in again.stdout
    df = trainscope.compare(ref + ":a", runs["b"])
    assert df.attrs["overall"][0]["verdict"] == "slower"
    nodata = str(tmp_path / "nodata.json")
    with open(nodata, "w", encoding="utf-8") as f:
        f.write(saved.stdout)
    refused = cli(nodata, runs["b"])
    assert refused.returncode == 3 and "holds no data of its B side" in refused.stderr


def test_save_never_replaces_an_input_and_an_existing_file_needs_force(runs, tmp_path):
    base = str(tmp_path / "base.json")
    first = cli(runs["a"], runs["b"], "--save", base)
    assert first.returncode == 0, first.stderr
    with open(base, "rb") as f:
        saved = f.read()
    # Comparing against the baseline while saving onto it would replace it: exit 2 naming it.
    for side in (base, base + ":a"):
        onto = cli(side, runs["b"], "--save", base, "--force")
        assert onto.returncode == 2, onto.stderr
        assert f"--save {base}: that is an input of this comparison ({side})" in onto.stderr
        assert onto.stdout == ""
    with open(base, "rb") as f:
        assert f.read() == saved
    # Any other existing file: refused without --force, replaced with it.
    again = cli(runs["a"], runs["a2"], "--save", base)
    assert again.returncode == 2 and "the file exists (--force replaces it)" in again.stderr
    with open(base, "rb") as f:
        assert f.read() == saved
    forced = cli(runs["a"], runs["a2"], "--save", base, "--force")
    assert forced.returncode == 0, forced.stderr
    with open(base, "rb") as f:
        assert f.read() != saved
    # Python: the same rules (ValueError, FileExistsError), force=True to replace.
    with pytest.raises(ValueError, match="an input of this comparison"):
        trainscope.compare(base, runs["b"], save=base, force=True)
    with pytest.raises(FileExistsError, match="--force replaces it"):
        trainscope.compare(runs["a"], runs["b"], save=base)
    trainscope.compare(runs["a"], runs["b"], save=base, force=True)


def test_filters_over_a_root_see_region_statistics_and_metrics_as_search_runs(tmp_path):
    """`compare --root R --a "regions.BATCH.median < X"` never matched while search_runs found
    the runs (issue 36): one row and one filter, C++'s, for both."""
    root = tmp_path / "runs"
    keys = (("BATCH", "CPU"), ("FORWARD", "CPU"))
    for name, scale, seed in (("fast", 1.0, 1), ("slow", 1.25, 3)):
        run_dir = write_run(str(root / name), keys=keys, rows_per_key=600, seed=seed,
                            scale=scale, run_id=("a" if name == "fast" else "b") * 32)
        write_summary(run_dir, 0, [(key, device, 600, 0, 0.01 * scale) for key, device in keys])
    a, b = "regions.BATCH.median < 0.011", "regions.BATCH.median > 0.011 and metrics.train/loss > 0"
    found = trainscope.search_runs(root, filter=a)
    assert list(found["run_id"]) == ["a" * 32]
    assert list(trainscope.search_runs(root, filter=b)["run_id"]) == ["b" * 32]
    done = cli("--root", str(root), "--a", a, "--b", b, "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["a"]["label"] == a and doc["b"]["label"] == b
    assert doc["pairs"][0]["overall"]["verdict"] == "slower"
    df = trainscope.compare(a, b, root=str(root))
    assert df.attrs["overall"][0]["verdict"] == "slower"


def test_real_jobs_under_trainscope_run(tmp_path):
    """Two real jobs, the second with twice the work per step, compared end to end."""
    command = trainscope_cli()
    job = ("import sys, time, trainscope\n"
           "t = trainscope.Timer()\n"
           "for i in range(200):\n"
           "    t.start('BATCH'); t.start('IO'); time.sleep(0.0005); t.end('IO')\n"
           "    time.sleep(float(sys.argv[1])); t.end('BATCH')\n")
    env = dict(os.environ)
    for name, work in (("a", "0.002"), ("b", "0.004")):
        done = subprocess.run([command, "run", "--run-dir", str(tmp_path / name), "--",
                               sys.executable, "-c", job, work], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.returncode == 0, done.stderr
    result = cli(str(tmp_path / "a"), str(tmp_path / "b"), "--fail-if-slower", "20")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "overall (step time (BATCH)): slower" in result.stdout
    assert "data-wait" in result.stdout and "throughput" in result.stdout
