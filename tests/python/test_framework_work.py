"""The work per step (docs/ledger.md) on the framework paths of `trainscope run --auto`:
the Hugging Face Trainer (its batches, or its own num_input_tokens_seen) and Lightning
(its batches, samples by its own extract_batch_size), on real transformers and
Lightning (tests/python/framework_jobs/work_train.py: every sample has the same
number of real tokens, so a step's samples and tokens are known by construction).

Each run's every step records exactly the samples and tokens the job says, the
ledger's rates are those figures over the steps' time, and the run's tag says where
they came from. Needs TRAINSCOPE_FRAMEWORK_PYTHON (torch 2.x, transformers,
Lightning) and TRAINSCOPE_CLI; skipped otherwise.
"""

import collections
import importlib.util
import json
import os
import subprocess

import pytest

import trainscope
from trainscope import _core

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "framework_jobs", "work_train.py")
CLI = os.environ.get("TRAINSCOPE_CLI")
FRAMEWORK_PYTHON = os.environ.get("TRAINSCOPE_FRAMEWORK_PYTHON")
needs_frameworks = pytest.mark.skipif(
    not (CLI and FRAMEWORK_PYTHON),
    reason="set TRAINSCOPE_FRAMEWORK_PYTHON to a python with torch 2.x, transformers and "
           "Lightning (tests/python/requirements-frameworks.txt) and TRAINSCOPE_CLI")


class Books:
    """What StepWork.step_ended writes, held here (no run)."""

    def __init__(self):
        self.tags, self.rows = {}, []

    def set_tag(self, key, value):
        self.tags[key] = value

    def warn(self, what, message):
        raise AssertionError(message)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_a_frameworks_batches_replace_the_forwards_until_it_lets_go():
    import torch  # pylint: disable=import-outside-toplevel
    from trainscope._work import StepWork  # pylint: disable=import-outside-toplevel
    work, books = StepWork(), Books()
    work.flush = lambda rec: books.rows.extend(work._pending) or work._pending.clear()
    ids = torch.ones(4, 16, dtype=torch.long)
    mask = torch.ones(4, 16, dtype=torch.long)
    mask[:, 13:] = 0
    # A batch as a Mapping that is no dict (Hugging Face's BatchEncoding is a UserDict).
    batch = collections.UserDict(input_ids=ids, attention_mask=mask)
    work.batch(torch, None, (ids,), {})  # a forward before the framework's first batch
    work.framework_batch("the X batch", batch)
    work.batch(torch, None, (ids,), {})  # two model calls inside the step: not counted
    work.batch(torch, None, (ids.float(),), {})
    work.framework_batch("the X batch", batch, samples=5)  # the framework's own size
    work.step_ended(books)
    assert books.rows == [(0, 9, 2 * 4 * 13)]
    assert books.tags == {trainscope._work.SOURCE_TAG:
                          "samples: the X batch; tokens: the X batch: attention_mask"}
    # The framework's token count replaces the batches' for its step only.
    work.framework_batch("the X batch", batch)
    work.framework_step_tokens(64.0, "X.tokens_seen")
    work.step_ended(books)
    work.framework_batch("the X batch", batch)
    work.step_ended(books)
    assert books.rows[1:] == [(1, 4, 64.0), (2, 4, 52)]
    # Once it lets go, the forwards count again (batch x sequence without a mask).
    work.release("the X batch")
    work.batch(torch, None, (ids,), {})
    work.step_ended(books)
    assert books.rows[3:] == [(3, 4, 64)]
    assert books.tags[trainscope._work.SOURCE_TAG] == \
        "samples: the model's inputs; tokens: the model's inputs: ids"


def run_job(root, options, ranks=1):
    """The job under `trainscope run --auto` (`ranks` > 1: under torchrun, DDP on the
    CPU): (run directory, the job's truth)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT",
                        "TRAINSCOPE_AUTO")}
    # The framework python imports this trainscope (a build tree's python/ directory).
    parent = os.path.dirname(os.path.dirname(os.path.abspath(trainscope.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(
        [parent] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", TRAINSCOPE_FLOPS="off")
    truth_path = os.path.join(root, "truth.json")
    done = subprocess.run([CLI, "run", "--root", os.path.join(root, "runs"), "--no-sample",
                           "--quiet", "--auto", "--", FRAMEWORK_PYTHON] +
                          (["-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                            str(ranks)] if ranks > 1 else []) + [JOB, "--out",
                           truth_path, "--root-dir", root] + options,
                          cwd=root, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    runs = os.listdir(os.path.join(root, "runs"))
    assert len(runs) == 1, runs
    with open(truth_path, encoding="utf-8") as truth:
        return os.path.join(root, "runs", runs[0]), json.load(truth)


def check_work(run_dir, truth):
    """Every step of every rank has the job's samples and tokens (per rank); the
    ledger's rates are them over each rank's steps' time (within 2%), summed over
    ranks; the run's source tag."""
    run = trainscope.read_run(run_dir)
    metrics = run.metrics
    world = truth["world_size"]
    for rank in range(world):
        for key, expected in ((_core._STEP_SAMPLES_METRIC, truth["samples_per_step"]),
                              (_core._STEP_TOKENS_METRIC, truth["tokens_per_step"])):
            rows = metrics[(metrics["key"] == key) & (metrics["rank"] == rank)]
            rows = rows.sort_values("step")
            assert list(rows["step"]) == list(range(truth["steps"])), (rank, key, rows)
            assert set(rows["value"]) == {expected}, (rank, key, list(rows["value"]), expected)
    ledger = trainscope.ledger(run_dir)
    assert ledger["steps"] == truth["steps"] * world, ledger  # (every rank's)
    assert [rank["rank"] for rank in ledger["ranks"]] == list(range(world)), ledger
    tokens_per_s = samples_per_s = 0.0
    for rank in ledger["ranks"]:
        step_time = rank["seconds"] / rank["steps"]  # the rank's mean step period
        assert rank["tokens_per_s"] == pytest.approx(truth["tokens_per_step"] / step_time,
                                                     rel=0.02), ledger
        assert rank["samples_per_s"] == pytest.approx(truth["samples_per_step"] / step_time,
                                                      rel=0.02), ledger
        tokens_per_s += truth["tokens_per_step"] / step_time
        samples_per_s += truth["samples_per_step"] / step_time
    assert ledger["tokens_per_s"] == pytest.approx(tokens_per_s, rel=0.02), ledger
    assert ledger["samples_per_s"] == pytest.approx(samples_per_s, rel=0.02), ledger
    # `trainscope diagnose --json` holds the same ledger.
    done = subprocess.run([CLI, "diagnose", run_dir, "--json"], capture_output=True, text=True,
                          timeout=120, check=True)
    document = json.loads(done.stdout)["ledger"]
    assert document["tokens_per_s"] == pytest.approx(ledger["tokens_per_s"])
    return run.tags[_core._WORK_SOURCE_TAG]


@needs_frameworks
def test_hugging_face_counts_the_trainers_batches(tmp_path):
    # The Trainer counts no tokens: the batches', padding excluded by attention_mask.
    run_dir, truth = run_job(os.fspath(tmp_path), ["--framework", "hf", "--count", "no"])
    assert truth["steps"] == 12 and truth["num_input_tokens_seen"] == 0
    source = check_work(run_dir, truth)
    assert source == ("samples: the Trainer's batch; tokens: the Trainer's batch: "
                      "attention_mask"), source


@needs_frameworks
@pytest.mark.parametrize("count", ["all", "non_padding"])
def test_hugging_face_takes_the_trainers_own_token_count(tmp_path, count):
    # include_num_input_tokens_seen="all": the Trainer's count, padding included (what
    # the user asked it to count), step by step: not the batches' unpadded tokens.
    run_dir, truth = run_job(os.fspath(tmp_path), ["--framework", "hf", "--count", count])
    assert truth["num_input_tokens_seen"] == truth["tokens_per_step"] * truth["steps"]
    source = check_work(run_dir, truth)
    assert source == ("samples: the Trainer's batch; tokens: "
                      f"Trainer.num_input_tokens_seen ({count})"), source


@needs_frameworks
def test_lightning_counts_its_batch_once_however_many_modules_it_calls(tmp_path):
    # training_step calls an embedding and a head: the batch's samples once (Lightning's
    # extract_batch_size), its tokens from the dict's attention_mask.
    run_dir, truth = run_job(os.fspath(tmp_path), ["--framework", "lightning"])
    assert truth["steps"] == 12
    source = check_work(run_dir, truth)
    assert source == ("samples: the Lightning batch; tokens: the Lightning batch: "
                      "attention_mask"), source


@needs_frameworks
def test_hugging_face_under_ddp_shares_the_trainers_gathered_count_among_ranks(tmp_path):
    # num_input_tokens_seen is every rank's (gathered): each rank records its share.
    run_dir, truth = run_job(os.fspath(tmp_path), ["--framework", "hf", "--count", "all"],
                             ranks=2)
    assert truth["world_size"] == 2
    assert truth["num_input_tokens_seen"] == 2 * truth["tokens_per_step"] * truth["steps"]
    source = check_work(run_dir, truth)
    assert source == ("samples: the Trainer's batch; tokens: "
                      "Trainer.num_input_tokens_seen (all, all ranks' / 2)"), source


@needs_frameworks
def test_lightning_under_ddp_counts_each_ranks_batches(tmp_path):
    run_dir, truth = run_job(os.fspath(tmp_path), ["--framework", "lightning"], ranks=2)
    assert truth["world_size"] == 2 and truth["steps"] == 12
    source = check_work(run_dir, truth)
    assert source == ("samples: the Lightning batch; tokens: the Lightning batch: "
                      "attention_mask"), source
