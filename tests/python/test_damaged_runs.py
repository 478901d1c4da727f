"""Damaged finished runs (issue 25): every reader says what is wrong, by file, and a
damaged run among many is skipped by name. The checks are C++ check_run's
(trainscope/run/run_check.hpp); these tests hold read_run, search_runs and the CLI to them."""

import json
import math
import os
import shutil
import subprocess
import warnings

import pytest

import trainscope
from run_files import trainscope_cli, write_run
from run_files import write_summary as _summary

pd = pytest.importorskip("pandas")

REGIONS_HEADER = "key,device,rank,thread,start_unix_ns,duration_ns,step,epoch\n"


def finished_run(path, rows=900, params=None, run_id="0123456789abcdef0123456789abcdef",
                 scale=1.0, keys=(("BATCH", "CPU"),)):
    """A FINISHED one-rank run of `rows` rows per key and a summary counting them."""
    write_run(str(path), rows_per_key=rows, keys=keys, params=params, run_id=run_id, scale=scale)
    _summary(str(path), 0, [(k, d, rows - 5, 5, 0.01 * scale) for k, d in keys])
    return str(path)


def cut(path, keep, rank=0):
    """Keeps the header and the first `keep` rows of regions-<rank>.csv."""
    name = os.path.join(path, f"regions-{rank}.csv")
    with open(name, encoding="utf-8") as f:
        lines = f.readlines()
    with open(name, "w", encoding="utf-8") as f:
        f.writelines(lines[:keep + 1])


def test_a_whole_run_reads_without_a_warning(tmp_path):
    run_dir = finished_run(tmp_path / "r")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = trainscope.read_run(run_dir)
    assert run.warnings == []
    assert len(run.regions) == 900


def test_a_regions_file_cut_in_half_is_a_warning_naming_file_key_and_counts(tmp_path):
    run_dir = finished_run(tmp_path / "r")
    cut(run_dir, 453)
    regions = os.path.join(run_dir, "regions-0.csv")
    with pytest.warns(trainscope.TrainscopeWarning) as caught:
        run = trainscope.read_run(run_dir)
    messages = [str(w.message) for w in caught]
    assert len(run.warnings) == 1 and run.warnings[0] in messages
    assert regions in run.warnings[0]
    assert "holds 453 rows of BATCH on CPU" in run.warnings[0]
    assert "summary-0.json counts 900" in run.warnings[0]  # 895 + 5 warm-up
    assert caught[0].filename == __file__  # points at the caller
    assert len(run.regions) == 453


@pytest.mark.parametrize("damage", ["missing", "empty", "header only"])
def test_region_rows_lost_in_a_finished_run_is_an_error_naming_the_file(tmp_path, damage):
    run_dir = finished_run(tmp_path / "r")
    regions = os.path.join(run_dir, "regions-0.csv")
    if damage == "missing":
        os.remove(regions)
    else:
        with open(regions, "w", encoding="utf-8") as f:
            f.write("" if damage == "empty" else REGIONS_HEADER)
    with pytest.raises(ValueError, match="regions-0.csv") as error:
        trainscope.read_run(run_dir)
    assert "ended FINISHED" in str(error.value)
    assert "summary-0.json counts 900 regions" in str(error.value)


def test_a_bad_line_is_raised_by_the_read_of_regions_not_by_read_run(tmp_path):
    run_dir = finished_run(tmp_path / "r")
    with open(os.path.join(run_dir, "regions-0.csv"), "a", encoding="utf-8") as f:
        f.write("BATCH,CPU,0,0,1,12x34,0,0\n")
    run = trainscope.read_run(run_dir)
    assert run.warnings == []
    assert len(run.metrics) > 0  # the rest of the run stays readable
    with pytest.raises(ValueError, match="regions-0.csv"):
        _ = run.regions


def test_a_corrupt_summary_is_skipped_with_a_warning_and_the_run_stays_readable(tmp_path):
    run_dir = finished_run(tmp_path / "r")
    with open(os.path.join(run_dir, "summary-0.json"), "w", encoding="utf-8") as f:
        f.write('{"format": "trainscope.stats", "entr')
    with pytest.warns(trainscope.TrainscopeWarning, match=r"summary-0.json.*skipped"):
        run = trainscope.read_run(run_dir)
    assert len(run.regions) == 900
    assert run.summaries.empty
    with pytest.warns(trainscope.TrainscopeWarning, match=r"summary-0.json.*skipped"):
        frame = trainscope.search_runs(run_dir)
    assert len(frame) == 1 and math.isnan(frame["regions.BATCH.median"][0])


def _four_runs(root):
    for i, p in enumerate((1, 2, 4, 8)):
        finished_run(root / f"run{p}", params={"p": str(p)}, run_id=f"{i:032x}", scale=1.0 / p)
    return root


def test_search_runs_skips_and_names_a_run_without_run_json_or_with_lost_rows(tmp_path):
    root = _four_runs(tmp_path / "runs")
    os.remove(root / "run2" / "run.json")
    os.remove(root / "run4" / "regions-0.csv")
    with pytest.warns(trainscope.TrainscopeWarning) as caught:
        frame = trainscope.search_runs(root)
    messages = " | ".join(str(w.message) for w in caught)
    assert sorted(frame["params.p"]) == ["1", "8"]
    assert f"{root / 'run2'}: skipped" in messages and "run.json" in messages
    assert f"{root / 'run4'}: skipped" in messages and "regions-0.csv" in messages


def _cli(*args):
    return subprocess.run([trainscope_cli(), *map(str, args)], capture_output=True, text=True,
                          timeout=300, check=False)


def test_every_cli_reader_warns_of_a_regions_file_cut_short(tmp_path):
    keys = (("IO", "CPU"), ("BATCH", "CPU"))
    run_dir = finished_run(tmp_path / "r", keys=keys)
    base = finished_run(tmp_path / "base", keys=keys, run_id="1" * 32)
    cut(run_dir, 900 + 453)  # every IO row, 453 BATCH rows of 900
    regions = os.path.join(run_dir, "regions-0.csv")
    page = tmp_path / "page.html"
    for args in (("report", run_dir, "-o", page, "-q"), ("stalls", run_dir),
                 ("diagnose", run_dir), ("compare", base, run_dir),
                 ("model", run_dir, "--params", "p")):
        done = _cli(*args)
        assert f"{regions} holds 453 rows of BATCH on CPU, but summary-0.json counts 900" in \
            done.stderr, (args, done.stderr)
        assert "rows of IO" not in done.stderr, args
    assert "holds 453 rows of BATCH on CPU" in page.read_text(encoding="utf-8")  # on the page


def test_cli_readers_refuse_a_run_whose_region_rows_are_lost(tmp_path):
    run_dir = finished_run(tmp_path / "r", keys=(("BATCH", "CPU"), ("IO", "CPU")))
    os.remove(os.path.join(run_dir, "regions-0.csv"))
    base = finished_run(tmp_path / "base", keys=(("BATCH", "CPU"), ("IO", "CPU")),
                        run_id="1" * 32)
    # top too (issue 36: it said "NO-DATA: no step key" and exited 0): one rule, check_run.
    for args in (("report", run_dir, "-o", tmp_path / "p.html", "-q"), ("stalls", run_dir),
                 ("diagnose", run_dir), ("compare", base, run_dir), ("top", run_dir, "--once"),
                 ("top", run_dir, "--json")):
        done = _cli(*args)
        assert done.returncode != 0, args
        assert "regions-0.csv: no such file, but rank 0 ended FINISHED" in done.stderr, args
        assert "the run's timings are lost" in done.stderr, args
        if args[0] == "top":
            assert done.returncode == 1 and done.stdout == "", (args, done.stdout)


@pytest.mark.parametrize("kind", ["fifo", "directory", "loop"])
def test_a_run_json_that_is_no_file_is_named_and_a_single_run_is_an_error(tmp_path, kind):
    """run.json a FIFO, a directory or a symlink loop: `report RUN` wrote a study page of one
    UNREADABLE run and exited 0, `top` said "no run.json" (issue 36). Every reader says what
    it is and exits 1, as diagnose does; none waits on the FIFO."""
    run_dir = finished_run(tmp_path / "r")
    os.remove(os.path.join(run_dir, "run.json"))
    path = os.path.join(run_dir, "run.json")
    what = {"fifo": "it is a FIFO", "directory": "it is a directory",
            "loop": "symbolic links"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    else:
        os.symlink("run.json", path)
    page = tmp_path / "page.html"
    for args in (("report", run_dir, "-o", page, "-q"), ("diagnose", run_dir),
                 ("top", run_dir, "--once"), ("top", run_dir, "--json")):
        done = _cli(*args)
        assert done.returncode == 1, (args, done.stderr)
        assert what in done.stderr and path in done.stderr, (args, done.stderr)
        assert "no run.json" not in done.stderr, (args, done.stderr)
    assert not page.exists()


def test_model_and_report_skip_and_name_a_damaged_run_and_say_how_many_points(tmp_path):
    root = _four_runs(tmp_path / "runs")
    shutil.move(root / "run2" / "run.json", tmp_path / "run.json")  # run.json lost
    done = _cli("model", root, "--params", "p", "--json")
    assert done.returncode == 0, done.stderr
    assert f"{root / 'run2'}: skipped" in done.stderr and "run.json" in done.stderr
    model = json.loads(done.stdout)["models"][0]
    assert (model["points"], model["values"]) == (3, 3)
    text = _cli("model", root, "--params", "p")
    assert "(3 points, 3 values" in text.stdout
    page = tmp_path / "study.html"
    done = _cli("report", root, "-o", page, "-q", "--scaling", "p")
    assert done.returncode == 0, done.stderr
    assert f"{root / 'run2'}: skipped" in done.stderr
    html = page.read_text(encoding="utf-8")
    assert '"points_used":3' in html and '"runs_used":3' in html


def test_a_summary_with_a_negative_statistic_is_damaged_and_named(tmp_path):
    """A summary whose median and total are -1.0 was read without a word (issue 36:
    regions.BATCH.median = -1.0): it is a damaged summary, warned naming the field, and its
    statistics are NaN."""
    root = tmp_path / "runs"
    run_dir = finished_run(root / "r")
    _summary(run_dir, 0, [("BATCH", "CPU", 895, 5, -1.0)])
    with pytest.warns(trainscope.TrainscopeWarning) as caught:
        frame = trainscope.search_runs(root)
    messages = " ".join(str(w.message) for w in caught)
    assert 'summary-0.json: entry "BATCH" on CPU: total is -895, below 0' in messages, messages
    assert math.isnan(frame.loc[0, "regions.BATCH.median"])
    done = _cli("diagnose", run_dir)
    assert done.returncode == 0 and "total is -895, below 0" in done.stderr, done.stderr
