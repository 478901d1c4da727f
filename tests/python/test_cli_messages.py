"""What the `trainscope` command says when it is used wrongly (issue 26, "Messages"):
a misspelled command or option gets "did you mean", a usage error is the one line
that is wrong and where to read more (not the whole usage), `--devices` naming a GPU
the machine lacks stops before anything runs, and `trainscope report RUN` without -o
writes ./<run name>.html.
"""

import os
import subprocess

from run_files import trainscope_cli


def _cli(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINSCOPE_RUN")}
    return subprocess.run([trainscope_cli(), *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120, check=False)


def test_a_misspelled_command_gets_did_you_mean_and_one_line():
    done = _cli("rnu", "--", "true")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "trainscope: unknown command 'rnu' (did you mean 'run'?)", done.stderr
    assert lines[1:] == ["(see `trainscope --help`)"], done.stderr
    # Nothing close: no guess.
    far = _cli("frobnicate")
    assert "did you mean" not in far.stderr and "unknown command 'frobnicate'" in far.stderr


def test_a_misspelled_option_gets_did_you_mean_and_no_usage_dump(tmp_path):
    done = _cli("run", "--root", str(tmp_path), "--intervall", "1", "--", "true")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines == ["trainscope run: unknown option --intervall (did you mean '--interval'?)",
                     "(see `trainscope run --help`)"], done.stderr
    assert os.listdir(tmp_path) == []
    # With its value attached, and for another command.
    done = _cli("compare", "--treshold=0.05", "a", "b")
    assert "unknown option --treshold=0.05 (did you mean '--threshold'?)" in done.stderr, \
        done.stderr
    # A usage error of another kind: its one line, then where to read more.
    done = _cli("report")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "trainscope report: missing a run directory or sweep directory",
        "(see `trainscope report --help`)"], done.stderr


def test_devices_the_machine_lacks_stop_before_anything_runs(tmp_path):
    done = _cli("run", "--root", str(tmp_path), "--devices", "7", "--", "echo", "ran")
    assert done.returncode == 2, done.stderr
    assert "ran" not in done.stdout
    assert "--devices" in done.stderr and "7" in done.stderr, done.stderr
    assert "this machine has no GPU" in done.stderr or "GPU 7 does not exist" in done.stderr
    assert os.listdir(tmp_path) == [], "a run directory was made"


def test_report_without_o_writes_the_run_name_html_here(tmp_path):
    root = tmp_path / "runs"
    made = _cli("run", "--root", str(root), "--name", "my first/run", "--no-sample", "--quiet",
                "--", "true")
    assert made.returncode == 0, made.stderr
    (run_dir,) = [root / name for name in os.listdir(root)]
    here = tmp_path / "here"
    here.mkdir()
    done = _cli("report", str(run_dir), "--quiet", cwd=here)
    assert done.returncode == 0, done.stderr
    assert os.listdir(here) == ["my_first_run.html"]
    assert done.stdout.strip() == "wrote my_first_run.html"
    page = (here / "my_first_run.html").read_text(encoding="utf-8")
    assert "<html" in page and "my first/run" in page
