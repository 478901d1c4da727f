"""Tests on a real (local, one-node) Slurm: see slurm_support.py and
scripts/slurm-local.sh. Skipped, with the reason, without one."""

import sys
from run_files import trainscope_cli


def test_srun_starts_two_ranks(slurm):
    result = slurm("-n", "2", sys.executable, "-c",
                   'import os; print(os.environ["SLURM_PROCID"])', timeout=120)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split()) == ["0", "1"], result.stdout


def test_srun_of_trainscope_run_gives_one_run_with_two_ranks(slurm, tmp_path):
    """`srun -n 2 trainscope run -- python train.py`: two launchers join one run (the run id
    comes from SLURM_JOB_ID + SLURM_STEP_ID), each task's python is a rank (SLURM_PROCID)
    with its own files and summary; the launchers are not ranks."""
    import json
    import os
    import textwrap

    cli = trainscope_cli()
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import trainscope
        tmr = trainscope.Timer()
        for step in range(5):
            with tmr.scope(trainscope.TimeType.BATCH):
                pass
            trainscope.log_metric("loss", 1.0 / (step + 1), step=step)
    """))
    root = tmp_path / "runs"
    result = slurm("-n", "2", cli, "run", "--root", root, "--interval", "0.2", "--",
                   sys.executable, script, "--lr", "0.1", timeout=180,
                   env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert result.returncode == 0, result.stderr
    runs = os.listdir(root)
    assert len(runs) == 1, runs
    run_dir = root / runs[0]
    files = sorted(os.listdir(run_dir))
    ranks = [json.loads((run_dir / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["world_size"] == 2 and r["status"] == "FINISHED" for r in ranks), ranks
    for r in (0, 1):
        summary = json.loads((run_dir / f"summary-{r}.json").read_text())
        assert [(e["key"], e["count"]) for e in summary["entries"]] == [("BATCH", 5)]
    launchers = [f for f in files if f.startswith("launcher-")]
    assert len(launchers) == 2, files
    assert {r["launcher"] for r in ranks} == {
        "{host}:{pid}".format(**json.loads((run_dir / f).read_text())) for f in launchers}
    assert [f for f in files if f.startswith("host-") and f.endswith(".csv")], files
    info = json.loads((run_dir / "run.json").read_text())
    assert info["params"] == {"lr": "0.1"}
