"""Tests on a real (local, one-node) Slurm: see slurm_support.py and
scripts/slurm-local.sh. Skipped, with the reason, without one."""

import sys


def test_srun_starts_two_ranks(slurm):
    result = slurm("-n", "2", sys.executable, "-c",
                   'import os; print(os.environ["SLURM_PROCID"])', timeout=120)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split()) == ["0", "1"], result.stdout
