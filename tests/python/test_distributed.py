"""A real two-rank torch.distributed job (gloo, CPU, DistributedDataParallel, a
DataLoader with worker processes) under `trainscope run`, read back with
trainscope.read_run: every rank's files are there and the slow rank is found.

The launcher starts the ranks itself with the variables torchrun sets
(torchrun does not run with Debian's torch 1.13 on Python 3.11).
Needs the CLI binary: TRAINSCOPE_CLI=<build>/tools/trainscope (skipped otherwise).
"""

import os
import subprocess
import sys
import textwrap

import pytest

import trainscope

CLI = os.environ.get("TRAINSCOPE_CLI")
pytestmark = pytest.mark.skipif(not CLI, reason="set TRAINSCOPE_CLI to the trainscope binary")

STEPS_PER_EPOCH = 12
EPOCHS = 2
# Far above the few ms by which a busy machine stalls the fast rank's compute now and then.
SLOW_RANK_SLEEP_S = 0.05

LAUNCHER = """
    import os, socket, subprocess, sys

    with socket.socket() as s:          # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2")
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    ranks = [subprocess.Popen([sys.executable, "train.py"],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
             for r in range(2)]
    sys.exit(max(abs(rank.wait()) for rank in ranks))
"""

TRAIN = f"""
    import os, time
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler
    import trainscope

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    samples = {STEPS_PER_EPOCH} * 16 * 2   # batches of 16, half per rank
    data = TensorDataset(torch.randn(samples, 8), torch.randn(samples, 1))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=16, sampler=sampler, num_workers=2)

    tmr = trainscope.Timer()            # joins TRAINSCOPE_RUN_DIR as this RANK
    step = 0
    for epoch in range({EPOCHS}):
        sampler.set_epoch(epoch)
        with tmr.scope(trainscope.TimeType.EPOCH):
            for inputs, targets in loader:
                tmr.start(trainscope.TimeType.BATCH)
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(inputs), targets)
                loss.backward()         # DDP all-reduces the gradients here
                optimizer.step()
                if rank == 1:
                    time.sleep({SLOW_RANK_SLEEP_S})   # the straggler
                tmr.end(trainscope.TimeType.BATCH)
                # The mean loss for logging: the fast rank waits for the slow one here,
                # outside its BATCH region.
                with tmr.scope(trainscope.TimeType.COMM):
                    mean_loss = loss.detach().clone()
                    dist.all_reduce(mean_loss)
                trainscope.log_metric("loss", loss.item(), step=step)
                if rank == 0:
                    trainscope.log_metric("mean_loss", mean_loss.item() / 2, step=step)
                step += 1
    dist.destroy_process_group()
"""


def test_a_two_rank_ddp_job_under_the_cli_names_its_straggler(tmp_path):
    work = tmp_path / "job"
    work.mkdir()
    (work / "launcher.py").write_text(textwrap.dedent(LAUNCHER))
    (work / "train.py").write_text(textwrap.dedent(TRAIN))
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRAINSCOPE_RUN_DIR", "MLFLOW_TRACKING_URI", "TRAINSCOPE_RUNS_ROOT")}
    env["OMP_NUM_THREADS"] = "1"  # two ranks and four loader workers on a small machine
    root = tmp_path / "runs"
    done = subprocess.run(
        [CLI, "run", "--root", str(root), "--interval", "0.25", "--name", "ddp", "--",
         sys.executable, "launcher.py"],
        cwd=work, env=env, capture_output=True, text=True, timeout=150, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    (run_dir,) = [root / name for name in os.listdir(root)]

    run = trainscope.read_run(run_dir)
    assert run.status == "FINISHED" and not run.crashed
    assert run.name == "ddp" and run.world_size == 2
    assert list(run.ranks["rank"]) == [0, 1] and list(run.ranks["world_size"]) == [2, 2]
    assert (run.ranks["status"] == "FINISHED").all()
    # The CLI is a launcher, never a rank.
    (launcher,) = run.launchers.itertuples()
    assert launcher.status == "FINISHED" and launcher.exit_code == 0
    assert launcher.command[-1] == "launcher.py"
    assert not run.hardware.empty and set(run.hardware["host"]) == set(run.hosts)

    steps = STEPS_PER_EPOCH * EPOCHS
    summaries = run.summaries
    for rank in (0, 1):
        assert os.path.exists(run_dir / f"summary-{rank}.json")
        mine = summaries[(summaries["rank"] == rank) & (summaries["device"] == "CPU")]
        counts = dict(zip(mine["key"], mine["count"]))
        assert counts == {"BATCH": steps, "EPOCH": EPOCHS, "COMM": steps}, rank
        batch = run.regions[(run.regions["rank"] == rank) & (run.regions["key"] == "BATCH")]
        assert list(batch["step"]) == list(range(steps))
        assert sorted(set(batch["epoch"])) == list(range(EPOCHS))
        loss = run.metrics[(run.metrics["rank"] == rank) & (run.metrics["key"] == "loss")]
        assert list(loss["step"]) == list(range(steps))

    stragglers = run.stragglers()  # BATCH on the CPU
    assert len(stragglers) == steps and (stragglers["n_ranks"] == 2).all()
    slow = (stragglers["slowest_rank"] == 1) & (stragglers["lag_s"] >= 0.6 * SLOW_RANK_SLEEP_S)
    # Nearly every step: a loaded machine may stall rank 0 once or twice.
    assert slow.sum() >= steps - 2, stragglers
    assert stragglers["lag_s"].median() >= 0.6 * SLOW_RANK_SLEEP_S
    # ... and the fast rank spends that time waiting in the all-reduce.
    comm = run.step_times("COMM")
    assert (comm[0] - comm[1]).median() >= 0.01
