"""trainscope.Timer from Python: Deep500's API and semantics, and the additions."""

import io
import json
import math
import re
import statistics
import time

import pytest

import trainscope
from trainscope import TimeType

DEEP500_LINE = re.compile(
    r"^min: \d+\.\d{5} mean: \d+\.\d{5} median: \d+\.\d{5} max: \d+\.\d{5} stdev: \d+\.\d{5}$")


def timed(timer, key, count, seconds=0.0):
    for _ in range(count):
        timer.start(key)
        if seconds:
            time.sleep(seconds)
        timer.end(key)


def test_time_type_is_deep500s_int_enum():
    assert [(t.name, int(t)) for t in TimeType] == [
        ("EPOCH", 1), ("BATCH", 2), ("FORWARD", 3), ("BACKWARD", 4), ("COMM", 5), ("IO", 6),
        ("OTHER", 7), ("ALL", 8)]
    assert isinstance(TimeType.EPOCH, int)


def test_counts_and_stats_match_the_recorded_times():
    timer = trainscope.Timer()
    timed(timer, TimeType.EPOCH, 5, seconds=0.001)
    times = timer.get_time(TimeType.EPOCH)
    assert len(times) == 5 and all(t >= 0.001 for t in times)
    stats = timer.get_time_stats(TimeType.EPOCH)
    assert stats.count == 5
    assert stats.total == pytest.approx(sum(times), rel=1e-12)
    assert stats.min == pytest.approx(min(times), rel=1e-12)
    assert stats.max == pytest.approx(max(times), rel=1e-12)
    assert stats.mean == pytest.approx(statistics.mean(times), rel=1e-12)
    assert stats.median == pytest.approx(statistics.median(times), rel=1e-12)
    assert stats.stdev == pytest.approx(statistics.stdev(times), rel=1e-9)
    assert stats.p5 <= stats.p25 <= stats.median <= stats.p75 <= stats.p95 <= stats.p99
    assert not stats.approximate and stats.warmup_excluded == 0


def test_single_sample_has_zero_stdev_and_empty_key_is_nan():
    timer = trainscope.Timer()
    timed(timer, TimeType.IO, 1)
    assert timer.get_time_stats(TimeType.IO).stdev == 0.0
    empty = timer.get_time_stats(TimeType.COMM)
    assert empty.count == 0 and math.isnan(empty.mean) and math.isnan(empty.min)
    assert timer.get_time(TimeType.COMM) == []


def test_get_time_returns_a_new_list():
    timer = trainscope.Timer()
    timed(timer, TimeType.BATCH, 3)
    first = timer.get_time(TimeType.BATCH)
    first.clear()
    assert len(timer.get_time(TimeType.BATCH)) == 3


def test_str_keys_are_interned_names_and_builtin_names_are_time_types():
    timer = trainscope.Timer()
    timer.start("EPOCH")
    timer.end(TimeType.EPOCH)
    timer.start("data_aug")
    timer.end("data_aug")
    timer.start(2)  # a TimeType's int value is the same key
    timer.end(TimeType.BATCH)
    keys = timer.keys()
    assert keys == [TimeType.EPOCH, "data_aug", TimeType.BATCH]
    assert isinstance(keys[0], TimeType) and isinstance(keys[1], str)
    assert timer.get_time_stats("data_aug").count == 1
    other = trainscope.Timer()
    other.start("data_aug")
    other.end("data_aug")
    assert other.keys() == ["data_aug"]


def test_keys_are_in_first_completed_order():
    timer = trainscope.Timer()
    timer.start(TimeType.EPOCH)
    timed(timer, TimeType.BATCH, 2)
    timer.end(TimeType.EPOCH)
    assert timer.keys() == [TimeType.BATCH, TimeType.EPOCH]


def test_nesting_the_same_key_raises_runtime_error_and_changes_nothing():
    timer = trainscope.Timer()
    timer.start(TimeType.BATCH)
    with pytest.raises(RuntimeError, match="Detected nesting for timing region type BATCH"):
        timer.start(TimeType.BATCH)
    timer.end(TimeType.BATCH)
    assert timer.get_time_stats(TimeType.BATCH).count == 1


def test_unbalanced_end_raises_runtime_error_and_timer_stays_usable():
    timer = trainscope.Timer()
    with pytest.raises(RuntimeError, match="Unbalanced end for timing region type FORWARD"):
        timer.end(TimeType.FORWARD)
    with pytest.raises(RuntimeError, match="Unbalanced end for timing region type my_key"):
        timer.end("my_key")
    timed(timer, TimeType.FORWARD, 2)
    assert timer.get_time_stats(TimeType.FORWARD).count == 2


@pytest.mark.parametrize("key", [TimeType.ALL, "ALL", 8])
def test_all_in_start_or_end_raises_value_error(key):
    timer = trainscope.Timer()
    with pytest.raises(ValueError, match="ALL"):
        timer.start(key)
    with pytest.raises(ValueError, match="ALL"):
        timer.end(key)
    timed(timer, TimeType.OTHER, 1)
    assert timer.keys() == [TimeType.OTHER]


@pytest.mark.parametrize("key", [0, -1, 10**6, 2**70])
def test_unknown_int_keys_raise_value_error(key):
    timer = trainscope.Timer()
    with pytest.raises(ValueError, match="Unknown timing region key"):
        timer.start(key)
    with pytest.raises(ValueError, match="Unknown timing region key"):
        timer.get_time_stats(key)


@pytest.mark.parametrize("key", [None, 1.5, b"EPOCH", ("EPOCH",)])
def test_other_key_types_raise_type_error(key):
    timer = trainscope.Timer()
    with pytest.raises(TypeError, match="TimeType or a str"):
        timer.start(key)
    with pytest.raises(TypeError, match="TimeType or a str"):
        timer.end(key)


def test_timer_is_usable_after_every_kind_of_error():
    timer = trainscope.Timer()
    timer.start(TimeType.EPOCH)
    for bad in (lambda: timer.start(TimeType.EPOCH), lambda: timer.end(TimeType.IO),
                lambda: timer.start(TimeType.ALL), lambda: timer.start(None)):
        with pytest.raises((RuntimeError, ValueError, TypeError)):
            bad()
    timer.end(TimeType.EPOCH)
    timed(timer, TimeType.IO, 1)
    assert [timer.get_time_stats(k).count for k in timer.keys()] == [1, 1]


def test_reset_drops_samples_and_open_regions():
    timer = trainscope.Timer()
    timed(timer, TimeType.BATCH, 2)
    timer.start(TimeType.EPOCH)
    timer.reset()
    assert timer.keys() == []
    with pytest.raises(RuntimeError, match="Unbalanced end"):
        timer.end(TimeType.EPOCH)


def test_merge_adds_the_other_timers_completed_regions():
    first, second = trainscope.Timer(), trainscope.Timer()
    timed(first, TimeType.BATCH, 2)
    timed(second, TimeType.BATCH, 3)
    timed(second, "data_aug", 1)
    second.start(TimeType.EPOCH)  # open: not merged
    first.merge(second)
    assert first.get_time_stats(TimeType.BATCH).count == 5
    assert first.keys() == [TimeType.BATCH, "data_aug"]
    assert second.get_time_stats(TimeType.BATCH).count == 3
    with pytest.raises(ValueError, match="itself"):
        first.merge(first)


def test_warmup_excludes_the_first_regions_of_every_key():
    timer = trainscope.Timer(warmup=2)
    timed(timer, TimeType.BATCH, 5)
    stats = timer.get_time_stats(TimeType.BATCH)
    assert (stats.count, stats.warmup_excluded) == (3, 2)
    assert len(timer.get_time(TimeType.BATCH)) == 3


def test_past_the_exact_sample_cap_stats_are_approximate_and_get_time_fails():
    timer = trainscope.Timer(exact_sample_cap=4)
    timed(timer, TimeType.BATCH, 10)
    stats = timer.get_time_stats(TimeType.BATCH)
    assert stats.count == 10 and stats.approximate
    with pytest.raises(RuntimeError, match="exact-sample cap"):
        timer.get_time(TimeType.BATCH)


def test_constructor_options_are_keyword_only_and_checked():
    with pytest.raises(TypeError):
        trainscope.Timer(5)
    for bad in (0.0, 1.0, float("nan")):
        with pytest.raises(ValueError, match="sketch_relative_error"):
            trainscope.Timer(sketch_relative_error=bad)
    trainscope.Timer(warmup=1, exact_sample_cap=8, sketch_relative_error=0.05, nvtx=False)


def test_time_stats_behaves_like_deep500s_named_tuple():
    timer = trainscope.Timer()
    timed(timer, TimeType.EPOCH, 4, seconds=0.0005)
    stats = timer.get_time_stats(TimeType.EPOCH)
    as_tuple = (stats.min, stats.mean, stats.median, stats.max, stats.stdev)
    assert tuple(stats) == as_tuple and len(stats) == 5
    low, mean, median, high, stdev = stats
    assert (low, mean, median, high, stdev) == as_tuple
    assert stats[0] == stats.min and stats[-1] == stats.stdev and stats[1:3] == as_tuple[1:3]
    with pytest.raises(IndexError):
        stats[5]  # pylint: disable=pointless-statement
    assert stats._fields == ("min", "mean", "median", "max", "stdev")
    assert str(stats) == ("min: {:.5f} mean: {:.5f} median: {:.5f} max: {:.5f} "
                          "stdev: {:.5f}".format(*as_tuple))
    fields = stats._asdict()
    assert list(fields)[:7] == ["count", "total", "min", "mean", "median", "max", "stdev"]
    assert fields["count"] == 4 and fields["p95"] == stats.p95 and fields["approximate"] is False
    assert repr(stats).startswith("TimeStats(count=4, total=")
    with pytest.raises(AttributeError):
        stats.mean = 1.0


def test_time_stats_fields_are_the_one_cpp_field_list():
    fields = trainscope._core._TIME_STATS_FIELDS
    names = [name for name, _, _ in fields]
    assert names[:2] == ["count", "total"] and names[-1] == "approximate"
    assert len(set(names)) == len(names)
    timer = trainscope.Timer(warmup=1)
    timed(timer, TimeType.BATCH, 4, seconds=0.0005)
    stats = timer.get_time_stats(TimeType.BATCH)
    assert list(stats._asdict()) == names
    kinds = {"integer": int, "double": float, "boolean": bool}
    for name, kind, seconds in fields:
        value = getattr(stats, name)
        assert type(value) is kinds[kind], name  # pylint: disable=unidiomatic-typecheck
        assert stats._asdict()[name] == value or (value != value and kind == "double"), name
        assert seconds == (kind == "double" and name != "cv"), name
    # The JSON and CSV writers use the same list, in the same order.
    [entry] = json.loads(timer.format_all_time_stats("json"))["entries"]
    assert list(entry) == ["key", "device"] + names
    header = timer.format_all_time_stats("csv").splitlines()[0]
    assert header.split(",") == ["key", "device"] + names


def test_save_all_time_stats_names_the_wrong_path_type():
    timer = trainscope.Timer()
    with pytest.raises(TypeError, match="filename must be a str or os.PathLike.str., not bytes"):
        timer.save_all_time_stats(b"stats.txt")
    with pytest.raises(TypeError, match="os.PathLike object, not int"):  # os.fspath's own
        timer.save_all_time_stats(3)


def test_print_all_time_stats_writes_deep500s_layout():
    timer = trainscope.Timer()
    timed(timer, TimeType.EPOCH, 2)
    timed(timer, "data_aug", 3)
    out = io.StringIO()
    timer.print_all_time_stats(out)
    lines = out.getvalue().splitlines()
    assert lines[0::2][:2] == ["EPOCH", "data_aug"] and lines[-1] == "---"
    assert all(DEEP500_LINE.match(line) for line in lines[1:4:2])
    assert out.getvalue() == timer.format_all_time_stats()


def test_print_all_time_stats_defaults_to_sys_stdout(capsys):
    timer = trainscope.Timer()
    timed(timer, TimeType.IO, 1)
    timer.print_all_time_stats()
    assert capsys.readouterr().out == timer.format_all_time_stats("deep500")


def test_other_formats():
    timer = trainscope.Timer()
    timed(timer, TimeType.BATCH, 3)
    stats = timer.get_time_stats(TimeType.BATCH)
    [entry] = json.loads(timer.format_all_time_stats("json"))["entries"]
    assert (entry["key"], entry["device"], entry["count"]) == ("BATCH", "CPU", 3)
    assert entry["mean"] == pytest.approx(stats.mean, rel=1e-12)
    header, row = timer.format_all_time_stats("csv").splitlines()
    assert dict(zip(header.split(","), row.split(",")))["count"] == "3"
    assert "count" in timer.format_all_time_stats("table")
    out = io.StringIO()
    timer.print_all_time_stats(file=out, format="table")
    assert out.getvalue() == timer.format_all_time_stats("table")
    with pytest.raises(ValueError):
        timer.format_all_time_stats("yaml")


def test_save_all_time_stats_creates_a_new_file_only(tmp_path):
    timer = trainscope.Timer()
    timed(timer, TimeType.EPOCH, 2)
    path = tmp_path / "stats.txt"
    timer.save_all_time_stats(path)  # os.PathLike
    saved = path.read_text()
    assert saved == timer.format_all_time_stats()
    timed(timer, TimeType.EPOCH, 1)
    with pytest.raises(FileExistsError):
        timer.save_all_time_stats(str(path))
    assert path.read_text() == saved
    timer.save_all_time_stats(str(tmp_path / "stats.json"))
    json.loads((tmp_path / "stats.json").read_text())
    with pytest.raises(ValueError, match="stats.xyz"):
        timer.save_all_time_stats(tmp_path / "stats.xyz")
    with pytest.raises(FileNotFoundError):
        timer.save_all_time_stats(tmp_path / "missing" / "stats.txt")


def test_scope_is_a_context_manager():
    timer = trainscope.Timer()
    with timer.scope(TimeType.FORWARD) as region:
        assert region is not None
    with pytest.raises(KeyError):
        with timer.scope(TimeType.FORWARD):
            raise KeyError("body failed")
    assert timer.get_time_stats(TimeType.FORWARD).count == 2  # the failed body is timed too
    with timer.scope("outer"):
        with pytest.raises(RuntimeError, match="Detected nesting"):
            with timer.scope("outer"):
                pass
    assert timer.get_time_stats("outer").count == 1


def test_scope_is_a_decorator_opening_one_region_per_call():
    timer = trainscope.Timer()

    @timer.scope("step")
    def step(x):
        return x * 2

    assert [step(i) for i in range(3)] == [0, 2, 4]
    assert timer.get_time_stats("step").count == 3


def test_complete_all_is_a_no_op_on_the_cpu_timer():
    timer = trainscope.Timer()
    timed(timer, TimeType.BATCH, 2)
    timer.complete_all()
    assert timer.get_time_stats(TimeType.BATCH).count == 2
    assert timer.memory_bytes() > 0
