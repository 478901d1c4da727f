"""trainscope._core.find_run_dirs: "a set of runs" read one way (trainscope/run/run_dirs.hpp)."""

import pytest

from trainscope import _core
from run_files import write_run


def test_a_run_a_folder_of_runs_and_a_sweep_directory(tmp_path):
    run = write_run(tmp_path / "solo", params={"p": "1"})
    b = write_run(tmp_path / "folder" / "b", params={"p": "2"})
    a = write_run(tmp_path / "folder" / "a", params={"p": "3"})
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "sweep.json").write_text("{}")
    job = write_run(tmp_path / "sweep" / "runs" / "job-1", params={"p": "4"})
    assert _core.find_run_dirs(tmp_path / "solo") == [str(run)]
    assert _core.find_run_dirs(str(tmp_path / "folder")) == [str(a), str(b)]
    assert _core.find_run_dirs(tmp_path / "sweep") == [str(job)]  # its runs/
    assert _core.find_run_dirs([tmp_path / "sweep", tmp_path / "solo"]) == [str(job), str(run)]


def test_a_path_that_holds_no_run_says_why(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError,
                       match=rf"^{empty}: not a run \(no run.json\), and neither {empty} nor "
                             rf"{empty}/runs has a run directory$"):
        _core.find_run_dirs(empty)
    with pytest.raises(FileNotFoundError, match="no such run directory"):
        _core.find_run_dirs(tmp_path / "missing")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        _core.find_run_dirs(tmp_path / "file.txt")
    with pytest.raises(ValueError, match="no run directories given"):
        _core.find_run_dirs([])
