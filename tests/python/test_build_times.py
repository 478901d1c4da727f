"""scripts/build_times.py: the per-object compile times of docs/test-suite.md (ninja's log and
the CPU-time launcher), fed made-up logs."""

import importlib.util
import pathlib
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "build_times.py"

if not SCRIPT.exists():
    pytest.skip("runs from a repository checkout", allow_module_level=True)
_spec = importlib.util.spec_from_file_location("build_times", SCRIPT)
bt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bt)


def test_ninja_log_keeps_the_latest_entry_of_each_output(tmp_path):
    (tmp_path / ".ninja_log").write_text(
        "# ninja log v5\n"
        "0\t4000\t1\tCMakeFiles/trainscope_run.dir/src/run/run.cpp.o\tabc\n"
        "10\t1510\t1\ttests/CMakeFiles/run_test.dir/run/run_test.cpp.o\tdef\n"
        "0\t2500\t2\tCMakeFiles/trainscope_run.dir/src/run/run.cpp.o\tabd\n")
    assert bt.ninja_entries(str(tmp_path)) == {
        "CMakeFiles/trainscope_run.dir/src/run/run.cpp.o": 2.5,
        "tests/CMakeFiles/run_test.dir/run/run_test.cpp.o": 1.5}


def test_cpu_table_ranks_objects_and_sums_targets(tmp_path, capsys):
    log = tmp_path / "cpu.tsv"
    log.write_text("6.00\t20.0\tCMakeFiles/trainscope_report.dir/src/report/study.cpp.o\n"
                   "1.00\t3.0\tCMakeFiles/trainscope_report.dir/src/report/page.cpp.o\n"
                   "3.00\t9.0\ttools/CMakeFiles/trainscope_cli.dir/cli.cpp.o\n"
                   "not a row\n")
    entries = bt.cpu_entries(str(log))
    assert entries["tools/CMakeFiles/trainscope_cli.dir/cli.cpp.o"] == 3.0
    assert bt.main(["cpu", str(log), "--top", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "3 outputs, 10 s CPU in all"
    assert out[3] == "| 6.0 | 60.0% | CMakeFiles/trainscope_report.dir/src/report/study.cpp.o |"
    assert len([line for line in out if line.startswith("| ") and ".o |" in line]) == 2
    assert "| trainscope_report | 7 | 70.0% |" in out
    assert "| trainscope_cli | 3 | 30.0% |" in out


def test_launch_runs_the_compiler_and_logs_its_cpu_time(tmp_path):
    log = tmp_path / "cpu.tsv"
    out = tmp_path / "x.o"
    command = [sys.executable, "-c", "import sys; sum(range(10**6)); "
               "open(sys.argv[2], 'w').close()", "-o", str(out)]
    assert bt.main(["launch", str(log), "--", *command]) == 0
    assert out.exists()
    cpu, wall, output = log.read_text().rstrip("\n").split("\t")
    assert output == str(out) and float(cpu) > 0 and float(wall) > 0
    # The compiler's exit status is the launcher's.
    assert bt.main(["launch", str(log), "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert len(log.read_text().splitlines()) == 2
