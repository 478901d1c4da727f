"""One reader, one message (issue 25): trainscope.read_run reads regions-<r>.csv,
metrics-<r>.csv and host-<host>.csv through the C++ RunReader (_RunReader.region_columns /
metric_columns), so its frames hold what the CLI reads and its errors are the CLI's
(`regions-0.csv:101: duration_ns is "12x34", not an integer in range`), as ValueError.
Each test writes a run directory by hand (docs/run-format.md) and compares read_run with
`trainscope report` or with an independent parse of the same bytes (csv, pandas.read_csv)."""

import csv
import io
import json
import os
import random
import subprocess

import pytest

import trainscope
from run_files import trainscope_cli

pd = pytest.importorskip("pandas")
np = pytest.importorskip("numpy")

START_MS = 1761000000000
REGIONS_HEADER = "key,device,rank,thread,start_unix_ns,duration_ns,step,epoch\n"
METRICS_HEADER = "key,value,step,timestamp_ms,rank\n"
CLI_PREFIX = "trainscope report: "


def _write(path, text, mode="w"):
    with open(path, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""})) as f:
        f.write(text)


def _run(tmp_path, name="run", world_size=1, pid=4242, version=2):
    """A FINISHED one-rank run directory with run.json and rank-0.json."""
    run_dir = str(tmp_path / name)
    os.makedirs(run_dir)
    _write(os.path.join(run_dir, "run.json"), json.dumps({
        "format": "trainscope.run", "version": version, "id": "e" * 32, "name": name,
        "experiment": "Default", "start_time_ms": START_MS, "params": {}, "tags": {}}))
    _write(os.path.join(run_dir, "rank-0.json"), json.dumps({
        "format": "trainscope.rank", "version": version, "rank": 0, "local_rank": 0,
        "world_size": world_size, "host": "node1", "pid": pid, "status": "FINISHED",
        "start_time_ms": START_MS, "end_time_ms": START_MS + 1000,
        "heartbeat_ms": START_MS + 1000, "flush_interval_ms": 1000}))
    return run_dir


def _region_lines(rows, rank=0):
    return "".join(f"BATCH,CPU,{rank},0,{START_MS * 1_000_000 + i * 1000},{1000 + i},{i},0\n"
                   for i in range(rows))


def _cli_message(run_dir, tmp_path):
    """The one line of error `trainscope report` prints, without its prefix."""
    done = subprocess.run([trainscope_cli(), "report", run_dir, "-o", str(tmp_path / "x.html"),
                           "--quiet"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0, done.stdout
    lines = [line for line in done.stderr.splitlines() if line.startswith(CLI_PREFIX)]
    assert len(lines) == 1, done.stderr
    return lines[0][len(CLI_PREFIX):]


def _read_error(read):
    with pytest.raises(ValueError) as error:
        read()
    return str(error.value)


# --- errors: the C++ reader's message, the CLI's -----------------------------------------------


@pytest.mark.parametrize("row, what", [
    ("BATCH,CPU,0,0,1,12x34,0,0", 'duration_ns is "12x34", not an integer in range'),
    ("BATCH,CPU,0,0,99999999999999999999,5,0,0",
     'start_unix_ns is "99999999999999999999", not an integer in range'),
    ("BATCH,CPU,4294967296,0,1,5,0,0", 'rank is "4294967296", not an integer in range'),
    ("BATCH,CPU,0,0,1,-5,0,0", 'duration_ns is "-5", not a non-negative integer'),
    ("BATCH,TPU,0,0,1,5,0,0", 'device is "TPU", not CPU or GPU'),
    ("BATCH,CPU,0,0,1,5,0", "7 fields, expected 11 (or 10 or 8, written before steps' waits and before device starts)"),
    ("BATCH,GPU,0,0,1,5,0,0,4x2,0", 'gpu_start_ns is "4x2", not an integer in range'),
])
def test_a_bad_region_row_is_the_clis_error_naming_file_line_and_field(tmp_path, row, what):
    run_dir = _run(tmp_path)
    path = os.path.join(run_dir, "regions-0.csv")
    # Lines 2-100 are good, line 101 is not, line 102 is good again.
    _write(path, REGIONS_HEADER + _region_lines(99) + row + "\n" + _region_lines(1))
    run = trainscope.read_run(run_dir)
    message = _read_error(lambda: run.regions)
    assert message == f"{path}:101: {what}"
    assert _cli_message(run_dir, tmp_path) == message


def test_random_bytes_appended_to_metrics_name_the_first_bad_line(tmp_path):
    run_dir = _run(tmp_path)
    path = os.path.join(run_dir, "metrics-0.csv")
    good = "".join(f"train/loss,{1 / (i + 1)!r},{i},{START_MS + i},0\n" for i in range(307))
    # Random bytes, without quotes (a quote opens a field that may run to the end of the
    # file: a record being written, ignored) and ending in a line break.
    noise = bytes(b for b in random.Random(25).randbytes(4096) if b != ord('"')) + b"\n"
    _write(path, METRICS_HEADER + good, "w")
    _write(path, noise, "ab")
    run = trainscope.read_run(run_dir)
    message = _read_error(lambda: run.metrics)
    # Line 1 is the header, 2-308 the good rows: the noise starts on line 309.
    assert message.startswith(f"{path}:309: "), message
    assert _cli_message(run_dir, tmp_path) == message


def test_a_bad_host_metrics_row_is_named(tmp_path):
    run_dir = _run(tmp_path)
    path = os.path.join(run_dir, "host-node1.csv")
    _write(path, METRICS_HEADER + "system/cpu.util_pct,37.5,0,1,\nsystem/cpu.util_pct,inf,1,2,\n")
    run = trainscope.read_run(run_dir)
    assert _read_error(lambda: run.hardware) == (
        f'{path}:3: value is "inf", not a finite number')


@pytest.mark.parametrize("make, kind", [
    (os.mkfifo, "a FIFO"),
    (os.mkdir, "a directory"),
])
@pytest.mark.parametrize("file_name", ["regions-0.csv", "metrics-0.csv", "host-node1.csv"])
def test_something_else_in_a_csv_files_place_is_refused_by_name(tmp_path, make, kind,
                                                               file_name):
    # Not 0 rows, not skipped, not a reader waiting for a writer (files are opened
    # non-blocking).
    run_dir = _run(tmp_path)
    path = os.path.join(run_dir, file_name)
    make(path)
    run = trainscope.read_run(run_dir)
    message = _read_error(lambda: (run.regions, run.metrics, run.hardware))
    assert message == f'cannot read "{path}": it is {kind}, not a regular file'
    if file_name != "host-node1.csv":  # the report reads every rank's regions and metrics
        assert _cli_message(run_dir, tmp_path) == message


@pytest.mark.parametrize("field, value, expected", [
    ("world_size", 0, "an integer from 1 to 4294967295"),
    ("world_size", 10**12, "an integer from 1 to 4294967295"),
    ("pid", -1, "an integer from 0 to 9223372036854775807"),
])
def test_a_rank_file_out_of_range_is_refused_by_both(tmp_path, field, value, expected):
    run_dir = _run(tmp_path, **{field: value})
    message = _read_error(lambda: trainscope.read_run(run_dir))
    path = os.path.join(run_dir, "rank-0.json")
    assert message == f'{path}: field "{field}" is {value}, not {expected}'
    assert _cli_message(run_dir, tmp_path) == message


# --- what is read: the frames hold the file's rows, with the documented dtypes -----------------


def test_the_frames_hold_the_rows_an_independent_parser_reads(tmp_path):
    run_dir = _run(tmp_path)
    keys = ["BATCH", "data aug, \"v2\"", "two\nlines", "Zeta", "_under", "énergie"]
    rng = random.Random(7)
    rows = [[keys[rng.randrange(len(keys))], rng.choice(["CPU", "GPU"]), 0, rng.randrange(4),
             START_MS * 1_000_000 + i, rng.randrange(10**9), i // 3, i // 100]
            for i in range(1000)]
    # Rank 0's GPU rows carry a device start (some none) and a stream, its CPU BATCH rows
    # (steps) a run-queue wait (some none).
    for r in rows:
        gpu = r[1] == "GPU"
        r += [rng.choice([rng.randrange(-10**6, 0), rng.randrange(10**12), ""]) if gpu else "",
              rng.randrange(3) if gpu else "",
              rng.choice([rng.randrange(10**7), ""]) if r[0] == "BATCH" and not gpu else ""]
    text = io.StringIO(newline="")
    csv.writer(text, lineterminator="\n").writerows(rows)
    _write(os.path.join(run_dir, "regions-0.csv"),
           REGIONS_HEADER.rstrip("\n") + ",gpu_start_ns,stream,cpu_wait_ns\n" + text.getvalue())
    # Rank 1 has no rank file and only GPU rows, in the columns of runs recorded before
    # device starts: its own categories, unioned.
    _write(os.path.join(run_dir, "regions-1.csv"),
           REGIONS_HEADER + "BATCH,GPU,1,0,5,6,0,0\nnew key,GPU,1,0,7,8,0,0\n")
    _write(os.path.join(run_dir, "metrics-0.csv"), METRICS_HEADER +
           "train/loss,0.6931471805599453,0,1761000000100,0\n"
           "train/acc,1e-300,1,1761000000200,0\n")
    _write(os.path.join(run_dir, "host-node1.csv"), METRICS_HEADER +
           "system/cpu.util_pct,37.5,0,1761000001000,\n"
           "system/proc.rss_mb,2048,0,1761000001000,0\n")
    run = trainscope.read_run(run_dir)

    regions = run.regions
    expected = pd.concat([
        pd.read_csv(os.path.join(run_dir, f"regions-{r}.csv"), keep_default_na=False,
                    dtype={"key": "category", "device": "category"}) for r in (0, 1)],
        ignore_index=True)
    assert list(regions.columns) == list(expected.columns)
    assert {c: str(t) for c, t in regions.dtypes.items()} == {
        "key": "category", "device": "category", "rank": "int64", "thread": "int64",
        "start_unix_ns": "int64", "duration_ns": "int64", "step": "int64", "epoch": "int64",
        "gpu_start_ns": "Int64", "stream": "int64", "cpu_wait_ns": "Int64"}
    # Each file's categories sorted (as pandas sorts them), then unioned in rank order.
    assert list(regions["key"].cat.categories) == sorted(keys) + ["new key"]
    assert list(regions["device"].cat.categories) == ["CPU", "GPU"]
    for column in expected.columns[:8]:
        assert regions[column].astype(object).tolist() == expected[column].astype(object).tolist()
    # No device start: <NA> (an empty field, a row of 8); no stream: 0.
    want_start = [None if v == "" or pd.isna(v) else int(v) for v in expected["gpu_start_ns"]]
    assert [None if pd.isna(v) else int(v) for v in regions["gpu_start_ns"]] == want_start
    assert any(v is not None and v < 0 for v in want_start)  # before the reference
    want_stream = [0 if v == "" or pd.isna(v) else int(v) for v in expected["stream"]]
    assert regions["stream"].tolist() == want_stream
    want_wait = [None if v == "" or pd.isna(v) else int(v) for v in expected["cpu_wait_ns"]]
    assert [None if pd.isna(v) else int(v) for v in regions["cpu_wait_ns"]] == want_wait
    assert sum(v is not None for v in want_wait) > 20
    assert isinstance(regions.index, pd.RangeIndex) and regions.index.start == 0

    metrics = run.metrics
    assert {c: str(t) for c, t in metrics.dtypes.items()} == {
        "key": "category", "value": "float64", "step": "int64", "timestamp_ms": "int64",
        "rank": "int64"}
    assert list(metrics["key"].cat.categories) == ["train/acc", "train/loss"]
    assert metrics["value"].tolist() == [0.6931471805599453, 1e-300]  # exact

    hardware = run.hardware
    assert {c: str(t) for c, t in hardware.dtypes.items()} == {
        "key": "category", "value": "float64", "step": "int64", "timestamp_ms": "int64",
        "rank": "Int64", "host": "category"}
    assert hardware["rank"].isna().tolist() == [True, False] and hardware["rank"][1] == 0


def test_an_empty_or_header_only_file_is_an_empty_frame_of_the_dtypes(tmp_path):
    run_dir = _run(tmp_path)
    _write(os.path.join(run_dir, "regions-0.csv"), "")
    _write(os.path.join(run_dir, "metrics-0.csv"), METRICS_HEADER)
    run = trainscope.read_run(run_dir)
    assert run.regions.empty and str(run.regions["duration_ns"].dtype) == "int64"
    assert str(run.regions["key"].dtype) == "category"
    assert run.metrics.empty and str(run.metrics["value"].dtype) == "float64"


def test_a_file_larger_than_one_read_reads_whole_and_names_lines_past_it(tmp_path):
    # region_columns reads 16 MiB at a time: rows across the boundary are read once,
    # and a bad line past it is named by its line in the file.
    run_dir = _run(tmp_path)
    path = os.path.join(run_dir, "regions-0.csv")
    rows = 400_000  # about 22 MB
    _write(path, REGIONS_HEADER + _region_lines(rows))
    assert os.path.getsize(path) > 16 << 20
    regions = trainscope.read_run(run_dir).regions
    assert len(regions) == rows
    assert regions["step"].to_numpy().tolist() == list(range(rows))
    assert int(regions["duration_ns"].sum()) == sum(range(1000, 1000 + rows))
    _write(path, "BATCH,CPU,0,0,1,x,0,0\n", "a")
    message = _read_error(lambda: trainscope.read_run(run_dir).regions)
    assert message == f'{path}:{rows + 2}: duration_ns is "x", not an integer in range'


def test_a_version_1_metrics_file_still_splits_off_its_hardware(tmp_path):
    run_dir = _run(tmp_path, version=1)
    _write(os.path.join(run_dir, "metrics-0.csv"), METRICS_HEADER +
           "train/loss,0.5,0,1761000000100,0\n"
           "system/cpu.util_pct,37.5,0,1761000001000,0\n")
    run = trainscope.read_run(run_dir)
    assert list(run.metrics["key"]) == ["train/loss"]
    assert list(run.metrics["key"].cat.categories) == ["train/loss"]
    assert list(run.hardware["key"]) == ["system/cpu.util_pct"]
    assert str(run.hardware["rank"].dtype) == "Int64" and list(run.hardware["host"]) == ["node1"]


def test_a_key_that_is_not_utf8_reads_with_its_bytes_escaped(tmp_path):
    # The C++ reader takes any bytes for a key (as the CLI does, which shows them \x-escaped):
    # read_run keeps the row, the key's bad bytes as \xNN, instead of failing on decoding.
    run_dir = _run(tmp_path)
    _write(os.path.join(run_dir, "regions-0.csv"),
           REGIONS_HEADER.encode() + b"caf\xe9,CPU,0,0,1,5,0,0\nBATCH,CPU,0,0,2,6,1,0\n", "wb")
    regions = trainscope.read_run(run_dir).regions
    assert list(regions["key"]) == ["caf\\xe9", "BATCH"]
    assert list(regions["duration_ns"]) == [5, 6]


def test_a_metrics_row_without_a_rank_makes_the_rank_column_nullable(tmp_path):
    # The C++ reader takes an empty rank (a reading of no rank) in any metrics file; int64
    # cannot hold "none", so that file's rank column is Int64 with <NA> there.
    run_dir = _run(tmp_path)
    _write(os.path.join(run_dir, "metrics-0.csv"),
           METRICS_HEADER + "loss,0.5,0,1761000000100,0\nloss,0.25,1,1761000000200,\n")
    metrics = trainscope.read_run(run_dir).metrics
    assert str(metrics["rank"].dtype) == "Int64"
    assert metrics["rank"].isna().tolist() == [False, True] and metrics["rank"][0] == 0
    assert metrics["value"].tolist() == [0.5, 0.25]


_OTHER_PYTHON = os.environ.get("TRAINSCOPE_FRAMEWORK_PYTHON")


@pytest.mark.skipif(not _OTHER_PYTHON, reason="set TRAINSCOPE_FRAMEWORK_PYTHON to another "
                    "python with pandas (.ci/run's framework venv has numpy 2)")
def test_the_frames_are_the_same_under_another_numpy(tmp_path):
    """The columns reach numpy through the buffer protocol: under numpy 2 (the framework
    venv) a module built with pybind11 2.10 read every row as the first one (stride 0)."""
    run_dir = _run(tmp_path)
    keys = ["BATCH", "IO", "FORWARD"]
    _write(os.path.join(run_dir, "regions-0.csv"), REGIONS_HEADER + "".join(
        f"{keys[i % 3]},CPU,0,{i % 2},{START_MS * 1_000_000 + i},{100 + i},{i},0\n"
        for i in range(30)))
    _write(os.path.join(run_dir, "metrics-0.csv"), METRICS_HEADER + "".join(
        f"loss,{i / 4},{i},{START_MS + i},0\n" for i in range(10)))
    code = ("import json, sys, trainscope, numpy\n"
            "r = trainscope.read_run(sys.argv[1])\n"
            "print(json.dumps({'numpy': numpy.__version__,\n"
            "                  'regions': r.regions.astype(str).values.tolist(),\n"
            "                  'metrics': r.metrics.astype(str).values.tolist()}))\n")
    done = subprocess.run([_OTHER_PYTHON, "-c", code, run_dir], capture_output=True, text=True,
                          timeout=120, check=False, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    other = json.loads(done.stdout.strip().splitlines()[-1])
    run = trainscope.read_run(run_dir)
    assert other["regions"] == run.regions.astype(str).values.tolist(), other["numpy"]
    assert other["metrics"] == run.metrics.astype(str).values.tolist(), other["numpy"]
    assert sorted(set(row[0] for row in other["regions"])) == sorted(keys)
