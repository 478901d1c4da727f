"""W&B offline runs written by trainscope's WandbExporter, read back with the real wandb package.

A C++ helper (tests/helpers/wandb_writer.cpp, target trainscope_wandb_writer;
its path in TRAINSCOPE_WANDB_WRITER) writes a run from a spec; the test then
parses every record with wandb's own protobuf classes and checks the config,
every history row and the summary against the spec.

wandb 0.31 reads .wandb files only in its Go core (no Python reader is left),
so the framing is read here, and the same reader is first checked against a
run that wandb itself wrote (wandb.init(mode="offline")).
"""

import json
import os
import pathlib
import struct
import subprocess
import sys
import zlib

import pytest

wandb = pytest.importorskip("wandb", reason="wandb is not installed in the test venv")
from wandb.proto import wandb_internal_pb2  # noqa: E402  (after the importorskip)

WRITER_ENV = "TRAINSCOPE_WANDB_WRITER"
BLOCK = 32768
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def read_records(path, canonical=False):
    """Records of a .wandb file: LevelDB log framing, CRC-32 over type + payload.

    canonical: also require each record to be byte-identical to what the
    protobuf runtime serializes from it (no unknown fields, same encoding).
    wandb's Go writer orders fields differently, so only ours are canonical.
    """
    data = pathlib.Path(path).read_bytes()
    ident, magic, version = struct.unpack("<4sHB", data[:HEADER])
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0)
    records, partial, pos = [], None, HEADER
    while pos < len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:
            assert data[pos:pos + left] == bytes(left), f"non-zero block trailer at {pos}"
            pos += left
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        assert HEADER + length <= left, f"chunk crosses a block at {pos}"
        payload = data[pos + HEADER:pos + HEADER + length]
        assert crc == zlib.crc32(bytes([kind]) + payload), f"bad CRC at {pos}"
        pos += HEADER + length
        if kind == FULL:
            assert partial is None
            records.append(payload)
        elif kind == FIRST:
            assert partial is None
            partial = payload
        elif kind == MIDDLE:
            partial += payload
        else:
            assert kind == LAST, f"chunk type {kind} at {pos}"
            records.append(partial + payload)
            partial = None
    assert partial is None, "file ends inside a record"
    parsed = []
    for raw in records:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        if canonical:
            assert record.SerializeToString() == raw
        parsed.append(record)
    return parsed


def item_key(item):
    return item.key if item.key else "/".join(item.nested_key)


def items(updates):
    return {item_key(item): json.loads(item.value_json) for item in updates}


def test_reader_reads_a_run_wandb_wrote(tmp_path):
    # The reader above must agree with wandb's own writer before it judges ours.
    script = (
        "import wandb\n"
        f"run = wandb.init(mode='offline', dir={str(tmp_path)!r}, project='p', config={{'a': 1}})\n"
        "for step in range(3):\n"
        "    run.log({'loss': 1.0 / (step + 1)}, step=step)\n"
        "run.log({'big': 'x' * 70000}, step=3)\n"  # spans three blocks
        "run.finish()\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300, check=False, env={**os.environ, "WANDB_SILENT": "true"})
    assert result.returncode == 0, result.stderr
    (path,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    records = read_records(path)
    history = [items(r.history.item) for r in records if r.HasField("history")]
    assert [row["loss"] for row in history[:3]] == [1.0, 0.5, 1.0 / 3]
    assert history[3]["big"] == "x" * 70000


def expected_spec(wandb_dir):
    start_ms = 1_700_000_000_000
    keys = ["loss", "accuracy", "lr", "grad_norm", "tokens_per_s"]
    points = []
    for step in range(10):
        for i, key in enumerate(keys):
            points.append({"key": key, "value": (step + 1) * (i + 0.125) / 7,
                           "step": step, "timestamp_ms": start_ms + 1000 * step + 37 * i})
    # Batches of 7 points: most steps arrive in two write_metrics() calls.
    batches = [points[i:i + 7] for i in range(0, len(points), 7)]
    return {
        "wandb_dir": str(wandb_dir),
        "run": {"id": "00112233445566778899aabbccddeeff", "name": "resnet50 lr=0.1",
                "experiment": "imagenet-ablation", "start_time_ms": start_ms,
                "end_time_ms": start_ms + 12_345, "status": "FINISHED",
                "params": {"lr": "0.1", "optimizer": "sgd", "quote": 'say "hi"\n'}},
        "batches": batches,
        "summary": {"has_gpu_section": True,
                    "entries": [{"key": "BATCH", "device": "CPU", "mean": 0.0123},
                                {"key": "BATCH", "device": "GPU", "mean": 0.0101},
                                {"key": "data_aug", "device": "CPU", "mean": 0.5}]},
    }


@pytest.fixture
def written_run(tmp_path):
    writer = os.environ.get(WRITER_ENV)
    if not writer:
        pytest.skip(f"{WRITER_ENV} is not set: point it at the trainscope_wandb_writer executable "
                    "(built from tests/helpers)")
    spec = expected_spec(tmp_path / "wandb")
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    result = subprocess.run([writer, str(spec_path)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stderr
    run_dir = pathlib.Path(result.stdout.strip())
    return spec, run_dir


def test_run_dir_layout(written_run):
    spec, run_dir = written_run
    assert run_dir.parent == pathlib.Path(spec["wandb_dir"])
    assert run_dir.name.startswith("offline-run-")
    run_id = run_dir.name.rsplit("-", 1)[1]
    assert len(run_id) == 8 and run_id.isalnum() and run_id == run_id.lower()
    assert (run_dir / f"run-{run_id}.wandb").is_file()
    assert (run_dir / "files").is_dir()


def test_wandb_sync_finds_the_run(written_run):
    _, run_dir = written_run
    result = subprocess.run([sys.executable, "-m", "wandb", "sync", "--dry-run", str(run_dir)],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "Would sync 1 run(s)" in result.stdout + result.stderr


def test_config_history_and_summary_read_back_equal(written_run):
    spec, run_dir = written_run
    (path,) = run_dir.glob("run-*.wandb")
    records = read_records(path, canonical=True)
    kinds = [r.WhichOneof("record_type") for r in records]
    assert kinds[:2] == ["header", "run"]
    assert kinds[-1] == "exit"
    assert [r.num for r in records] == list(range(1, len(records) + 1))

    run = records[1].run
    run_spec = spec["run"]
    assert run.run_id == run_dir.name.rsplit("-", 1)[1]
    assert run.project == run_spec["experiment"]
    assert run.display_name == run_spec["name"]
    start_ms = run_spec["start_time_ms"]
    assert run.start_time.ToMilliseconds() == start_ms
    config = items(run.config.update)
    for record in records:
        if record.HasField("config"):
            config.update(items(record.config.update))
    assert config == {**run_spec["params"], "trainscope_run_id": run_spec["id"]}

    # Every history row, in order: one per step, with wandb's _step/_timestamp/_runtime.
    expected_rows = {}
    for batch in spec["batches"]:
        for p in batch:
            row = expected_rows.setdefault(p["step"], {"_step": p["step"]})
            row[p["key"]] = p["value"]
            row["_timestamp"] = p["timestamp_ms"] / 1000
            row["_runtime"] = (p["timestamp_ms"] - start_ms) / 1000
    history = [r.history for r in records if r.HasField("history")]
    assert [items(h.item) for h in history] == list(expected_rows.values())
    assert [h.step.num for h in history] == list(expected_rows)

    summary = {}
    for record in records:
        if record.HasField("summary"):
            summary.update(items(record.summary.update))
    expected_summary = dict(list(expected_rows.values())[-1])
    for entry in spec["summary"]["entries"]:
        expected_summary[f"train/{entry['device']}/{entry['key']}"] = entry["mean"]
    assert summary == expected_summary

    exit_record = records[-1].exit
    assert exit_record.exit_code == 0
    assert exit_record.runtime == 12


def run_with_wandb(tmp_path, job):
    """`trainscope run --wandb -- python -c JOB` into tmp_path: (cli, the run directory, the
    W&B file, its records)."""
    cli = os.environ.get("TRAINSCOPE_CLI")
    if not cli:
        pytest.skip("TRAINSCOPE_CLI (the built trainscope command) is not set")
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT")}
    env["WANDB_DIR"] = str(tmp_path)
    result = subprocess.run([cli, "run", "--root", str(tmp_path / "runs"), "--no-sample",
                             "--wandb", "--", sys.executable, "-c", job],
                            capture_output=True, text=True, timeout=120, check=False, env=env)
    assert result.returncode == 0, result.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    (path,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    return cli, run_dir, path, read_records(path, canonical=True)


def test_trainscope_run_wandb_carries_the_diagnosis_tags_as_summary(tmp_path):
    """`trainscope run --wandb`: the run's tags (the diagnosis set at its end) reach W&B as
    summary items, before the exit record."""
    from run_files import INPUT_BOUND_JOB  # pylint: disable=import-outside-toplevel
    _, run_dir, path, records = run_with_wandb(tmp_path, INPUT_BOUND_JOB)
    tags = json.loads((run_dir / "run.json").read_text())["tags"]
    assert records[-1].WhichOneof("record_type") == "exit"
    summary = {}
    for record in records:
        if record.HasField("summary"):
            summary.update(items(record.summary.update))
    assert summary["trainscope.diagnosis"].startswith("INPUT-BOUND")
    # Every tag of the run, with its value in run.json.
    for key, value in tags.items():
        assert summary[key] == value, key
    assert "trainscope.diagnosis.input_bound" in summary
    result = subprocess.run([sys.executable, "-m", "wandb", "sync", "--dry-run", str(path.parent)],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr


LEDGER_JOB = """
import time, trainscope
timer = trainscope.Timer()
for _ in range(400):
    timer.start("BATCH")
    time.sleep(0.005)
    timer.end("BATCH")
    trainscope.log_step_work(samples=2, tokens=2 * 32)
"""


def test_trainscope_run_wandb_gets_the_ledgers_figures(tmp_path):
    """`trainscope run --wandb` (issue 42): the ledger's rates reach W&B's history as metrics,
    the last one the end-of-run ledger's, as `trainscope diagnose` derives it."""
    cli, run_dir, _, records = run_with_wandb(tmp_path, LEDGER_JOB)
    tokens = [items(r.history.item)["ledger/tokens_per_s"] for r in records
              if r.HasField("history") and "ledger/tokens_per_s" in items(r.history.item)]
    assert tokens, "no ledger/tokens_per_s in the W&B history"
    diagnosis = json.loads(subprocess.run([cli, "diagnose", str(run_dir), "--json"],
                                          capture_output=True, text=True, timeout=120,
                                          check=True).stdout)
    assert tokens[-1] == pytest.approx(diagnosis["ledger"]["tokens_per_s"], rel=1e-9)
