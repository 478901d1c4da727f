"""Reading runs in Python: read_run() and search_runs(), as pandas DataFrames.

    run = trainscope.read_run("trainscope-runs/5378fc5b2fff80241b02fae439831f4e")
    run.status, run.params, run.world_size
    run.regions            # every rank's regions-<r>.csv in one DataFrame
    run.stragglers()       # per step: the slowest rank and its lag behind the median rank
    trainscope.search_runs("trainscope-runs", filter="params.lr = '0.1' and status = 'FINISHED'")

The format is docs/run-format.md. pandas is imported by these functions, never
by `import trainscope`. A run is read as it is when read: a run in progress
(or a crashed one) can end in a line cut short, which is ignored.
"""

import enum
import json
import math
import os
import warnings

from trainscope import _core

__all__ = ["Run", "read_run", "search_runs"]

# The format (file names, versions, headers, the crash rule, the status of a
# run) is the C++ RunReader's (trainscope._core._RunReader): this module only
# turns what it reads into DataFrames.

_REGIONS_DTYPES = {"key": "category", "device": "category", "rank": "int64", "thread": "int64",
                   "start_unix_ns": "int64", "duration_ns": "int64", "step": "int64",
                   "epoch": "int64", "gpu_start_ns": "Int64", "stream": "int64",
                   "cpu_wait_ns": "Int64"}
_METRICS_DTYPES = {"key": "category", "value": "float64", "step": "int64",
                   "timestamp_ms": "int64", "rank": "int64"}
# Host files leave `rank` empty for host-wide readings.
_HARDWARE_DTYPES = dict(_METRICS_DTYPES, rank="Int64")

# The fields of a summary entry, in file order, from the C++ TimeStats field list
# (trainscope/stats/time_stats.hpp kTimeStatsFields): (name, kind, seconds).
_TIME_STATS_FIELDS = _core._TIME_STATS_FIELDS
_STATISTICS = tuple(name for name, kind, _ in _TIME_STATS_FIELDS if kind != "boolean")
_STATISTIC_DTYPES = {name: {"integer": "int64", "double": "float64", "boolean": "bool"}[kind]
                     for name, kind, _ in _TIME_STATS_FIELDS}


def _pandas():
    try:
        import pandas  # pylint: disable=import-outside-toplevel
    except ImportError as error:
        raise RuntimeError("reading runs needs the pandas package: pip install pandas") from error
    return pandas


def _core():
    from trainscope import _core as core  # pylint: disable=import-outside-toplevel
    return core


# --- CSV files ---------------------------------------------------------------


def _frame(columns, dtypes):
    """A DataFrame of `dtypes` from the numpy columns the C++ RunReader read
    (_RunReader.region_columns / metric_columns): a categorical column comes as
    (codes, categories), a nullable Int64 `rank` with `rank_missing`."""
    pd = _pandas()
    np = _numpy()
    out = {}
    for name, dtype in dtypes.items():
        # The columns come as buffers (_core._Column): numpy takes them without a copy.
        value = columns[name]
        if dtype == "category":
            codes, categories = value
            value = pd.Categorical.from_codes(np.asarray(codes),
                                              categories=pd.Index(categories, dtype=object))
        elif dtype == "Int64" or columns.get(name + "_missing") is not None:
            # Host-wide readings have no rank; CPU regions no gpu_start_ns.
            mask = columns.get(name + "_missing")
            value = pd.arrays.IntegerArray(
                np.asarray(value),
                np.asarray(mask) if mask is not None else np.zeros(len(value), dtype=bool))
        else:
            value = np.asarray(value)
        out[name] = value
    return pd.DataFrame(out, copy=False)


def _empty_frame(dtypes):
    pd = _pandas()
    return pd.DataFrame({name: pd.Series([], dtype=dtype) for name, dtype in dtypes.items()})


def _concat(frames, dtypes, categorical=("key", "device", "host")):
    """Frames of the same columns in one, categorical columns kept categorical."""
    pd = _pandas()
    frames = [f for f in frames if f is not None]
    if not frames:
        return _empty_frame(dtypes)
    if len(frames) == 1:
        frame = frames[0]
        if not (isinstance(frame.index, pd.RangeIndex) and frame.index.start == 0
                and frame.index.step == 1):
            frame = frame.reset_index(drop=True)
        return frame
    columns = {}
    for name in frames[0].columns:
        if name in categorical:
            columns[name] = pd.api.types.union_categoricals(
                [pd.Categorical(f[name]) for f in frames])
        else:
            columns[name] = pd.concat([f[name] for f in frames], ignore_index=True)
    return pd.DataFrame(columns)


def _key_name(key):
    return key.name if isinstance(key, enum.Enum) else str(key)


# --- Run ---------------------------------------------------------------------


class Run:
    """A run directory as read by read_run(). Attributes:

    dir, id, name, experiment, version (of run.json: 1 or 2), params, tags (dicts of str);
    status: FINISHED, RUNNING, KILLED or FAILED, combined over ranks and launchers by
        the C++ RunReader (a crashed rank or launcher makes it FAILED; a lost launcher,
        gone while its command goes on, leaves the status to the ranks it started);
    crashed: whether a rank or launcher left RUNNING is gone (pid, on this host) or silent
        (heartbeat older than max(3 * flush_interval_ms, 10 s)); a lost launcher whose ranks
        go on (or ended) is not;
    start_time, end_time: tz-aware UTC pandas Timestamps (end_time is NaT while running);
    start_time_ms, end_time_ms: the same as Unix milliseconds (end_time_ms None while running);
    duration_s: end minus start; while running, up to the latest heartbeat (NaN before one);
    world_size: the largest WORLD_SIZE a rank recorded, at least the number of ranks;
    ranks: DataFrame of the rank files (rank, local_rank, world_size, host, pid, status,
        crashed, start_time_ms, end_time_ms, heartbeat_ms, flush_interval_ms, launcher);
    launchers: DataFrame of the launcher files (host, pid, command, exit_code, term_signal,
        status, crashed, start_time_ms, end_time_ms, heartbeat_ms, flush_interval_ms, lost:
        RUNNING but its process gone or silent, as after `kill -9` of `trainscope run`);
    hosts: sorted host names of the ranks and launchers;
    artifacts: paths of the files under artifacts/, relative to it;
    warnings: what is wrong with the run but leaves it readable, one message each naming the
        file (a regions file holding fewer rows of a key than its summary counts; a damaged
        summary, left out of `summaries`; rows of two processes at once in one rank's regions
        file); each is also a TrainscopeWarning.

    Read on first access, then kept (read_run() again for newer data):
    regions, metrics, hardware, summaries, steps, host_load (DataFrames; see their docstrings).
    """

    def __init__(self, path):
        pd = _pandas()
        self.dir = os.fspath(path)
        if os.path.exists(self.dir) and not os.path.isdir(self.dir):
            raise NotADirectoryError(f"{self.dir}: not a run directory (not a directory)")
        reader = _core()._RunReader.open(self.dir)
        self._reader = reader
        self.version = reader.version
        self.id = reader.id
        self.name = reader.name
        self.experiment = reader.experiment
        self.start_time_ms = reader.start_time_ms
        self.params = reader.params
        self.tags = reader.tags
        self.status = reader.status
        self.crashed = reader.crashed
        self.world_size = reader.world_size
        self.hosts = reader.hosts
        self.end_time_ms = None if reader.in_progress else reader.end_time_ms
        ranks = reader.ranks
        launchers = reader.launchers
        # What is there now: files written later are for the next read_run().
        self._files = reader.files()
        self.start_time = pd.Timestamp(self.start_time_ms, unit="ms", tz="UTC")
        self.end_time = (pd.NaT if self.end_time_ms is None
                         else pd.Timestamp(self.end_time_ms, unit="ms", tz="UTC"))
        # While running, up to the latest sign of life of any rank or launcher.
        alive_ms = max((max(s["heartbeat_ms"], s["end_time_ms"]) for s in ranks + launchers),
                       default=None)
        until_ms = self.end_time_ms if self.end_time_ms is not None else alive_ms
        self.duration_s = (math.nan if until_ms is None
                           else max(0, until_ms - self.start_time_ms) / 1000.0)
        rank_columns = ["rank", "local_rank", "world_size", "host", "pid", "status", "crashed",
                        "start_time_ms", "end_time_ms", "heartbeat_ms", "flush_interval_ms",
                        "launcher"]
        self.ranks = pd.DataFrame(ranks, columns=rank_columns)
        launcher_columns = ["host", "pid", "command", "exit_code", "term_signal", "status",
                            "crashed", "start_time_ms", "end_time_ms", "heartbeat_ms",
                            "flush_interval_ms", "lost"]
        self.launchers = pd.DataFrame(launchers, columns=launcher_columns)
        self._rank_hosts = {s["rank"]: s["host"] for s in ranks}
        self._cache = {}
        # The damage every reader names (C++ check_run, trainscope/run/run_check.hpp): region
        # rows lost in a rank that recorded them is a ValueError naming the file; a regions
        # file holding fewer rows than its summary counts and a damaged summary are warnings,
        # kept in `warnings`. A damaged summary is left out of `summaries`.
        problems = reader.check()
        errors = [p["message"] for p in problems if p["error"]]
        if errors:
            raise ValueError(errors[0])
        self.warnings = [p["message"] for p in problems if not p["error"]]
        for message in self.warnings:
            warnings.warn(message, _warning_category(), stacklevel=3)
        unreadable = {p["rank"] for p in problems if p["kind"] == "summary_unreadable"}
        self._files = [f for f in self._files
                       if not (f["kind"] == "summary" and f["rank"] in unreadable)]

    def __repr__(self):
        return (f"<trainscope.Run {self.id} name={self.name!r} status={self.status} "
                f"world_size={self.world_size} dir={self.dir!r}>")

    def _cached(self, name, read):
        if name not in self._cache:
            self._cache[name] = read()
        return self._cache[name]

    @property
    def artifacts(self):
        return self._reader.artifacts()

    def _files_of(self, kind):
        return [f for f in self._files if f["kind"] == kind]

    @property
    def regions(self):
        """Every rank's regions-<r>.csv, in rank order: key, device (categorical), rank,
        thread, start_unix_ns, duration_ns, step, epoch, stream (int64), gpu_start_ns
        (nullable Int64: a GPU region's device start, docs/run-format.md)."""
        return self._cached("regions", self._read_regions)

    def _read_regions(self):
        frames = []
        for file in self._files_of("regions"):
            columns = self._reader.region_columns(file["rank"])
            frames.append(None if columns is None else _frame(columns, _REGIONS_DTYPES))
        return _concat(frames, _REGIONS_DTYPES)

    def _metric_files(self):
        return self._cached("metric_files", self._read_metric_files)

    def _read_metric_files(self):
        """(user metrics, hardware readings of version-1 runs) of every metrics-<r>.csv."""
        user, hardware = [], []
        for file in self._files_of("metrics"):
            rank = file["rank"]
            columns = self._reader.metric_columns(rank=rank)
            if columns is None:
                continue
            frame = _frame(columns, _METRICS_DTYPES)
            if self.version == 1:
                # Version 1: `trainscope run` was rank 0 and recorded hardware as metrics.
                system = frame["key"].astype(str).str.startswith("system/").to_numpy()
                if system.any():
                    readings = frame[system].astype({"rank": "Int64"})
                    readings["key"] = readings["key"].cat.remove_unused_categories()
                    readings["host"] = self._rank_hosts.get(rank, "")
                    hardware.append(readings)
                    frame = frame[~system].copy()
                    frame["key"] = frame["key"].cat.remove_unused_categories()
            user.append(frame)
        return user, hardware

    @property
    def metrics(self):
        """User metrics of every rank's metrics-<r>.csv: key (categorical), value (float64),
        step, timestamp_ms, rank (int64; nullable Int64 only where a row has none). Hardware
        readings are in `hardware`."""
        return self._cached("metrics", lambda: _concat(self._metric_files()[0], _METRICS_DTYPES))

    @property
    def hardware(self):
        """Every host's host-<host>.csv: key (categorical), value, step, timestamp_ms,
        rank (nullable Int64: <NA> for host-wide readings), host (categorical). In
        version-1 runs, the `system/...` rows of the metrics files (host: that rank's)."""
        return self._cached("hardware", self._read_hardware)

    def _read_hardware(self):
        frames = []
        if self.version == 1:
            frames = list(self._metric_files()[1])
        for file in self._files_of("host_metrics"):
            columns = self._reader.metric_columns(host=file["host"])
            if columns is not None:
                frame = _frame(columns, _HARDWARE_DTYPES)
                frame["host"] = file["host"]
                frames.append(frame)
        hardware = _concat(frames, dict(_HARDWARE_DTYPES, host="category"))
        hardware["host"] = hardware["host"].astype("category")
        return hardware

    @property
    def summaries(self):
        """Every rank's summary-<r>.json: one row per rank, key and device with every
        field of the file (trainscope.TimeStats's: count, total, min, mean, median, max, stdev,
        p5 ... p99 in seconds, cv, median_ci_low, median_ci_high in seconds; NaN for null,
        warmup_excluded, approximate)."""
        return self._cached("summaries", self._read_summaries)

    def _read_summaries(self):
        pd = _pandas()
        rows, columns = [], ["rank", "key", "device"]
        for file in self._files_of("summary"):
            rank = file["rank"]
            self._reader.check_summary(rank)  # the format's checks, naming the file
            with open(file["path"], "rb") as f:
                entries = json.loads(f.read())["entries"]
            for entry in entries:
                for name in entry:
                    if name not in columns:
                        columns.append(name)
                rows.append(dict(entry, rank=rank))
        frame = pd.DataFrame(rows, columns=columns)
        for name in columns[3:]:
            dtype = _STATISTIC_DTYPES.get(name, "float64")
            if dtype == "bool":
                frame[name] = frame[name].astype(bool)
            elif dtype == "int64":
                frame[name] = pd.to_numeric(frame[name]).astype("int64")
            else:
                frame[name] = pd.to_numeric(frame[name], errors="coerce").astype("float64")
        frame["rank"] = frame["rank"].astype("int64")
        return frame

    @property
    def steps(self):
        """Every rank's steps as every view has them (the C++ steps room, docs/steps.md): rank,
        step, warmup (one of the rank's warm-up steps, which every run-wide figure leaves out:
        the data-wait share is ``steps[~steps.warmup]``'s data_wait_s over its period_s),
        start_unix_ns, period_s (to the next step's start; the last step its own duration),
        data_wait_s (the step thread's IO overlapping the period) and each phase's CPU time
        (h2d_s, forward_s, backward_s, optimizer_s, comm_s, comm_exposed_s,
        sync_s, rest_s), then the GPU busy time: gpu_busy_s (the GPU-timed compute rows'
        event spans, summed) and gpu_union_s (the union of their device intervals over all
        streams; NaN where a row of the step has no device start), and cpu_wait_s (the step
        thread's run-queue wait while its step ran; NaN in runs that did not record it)."""
        return self._cached("steps", lambda: _pandas().DataFrame(self._steps_and_load()[0]))

    @property
    def host_load(self):
        """Per host and CPU reading (docs/steps.md): host, time_ms, cores, cpu_util_pct,
        job_cpu_pct (the job's process trees summed, % of all cores), other_cpu_pct."""
        return self._cached("host_load", lambda: _pandas().DataFrame(self._steps_and_load()[1]))

    def _steps_and_load(self):
        return self._cached("steps_and_load", self._reader.steps)

    def step_times(self, key="BATCH", device="CPU"):
        """Seconds of region `key` on `device` per step (index) and rank (columns),
        summed over a step's regions; NaN where a rank has not recorded that step."""
        per = self._per_step_rank(key, device)
        return per.pivot(index="step", columns="rank", values="seconds")

    def stragglers(self, key="BATCH", device="CPU"):
        """Per step (index): slowest_rank and slowest_s, the rank with the longest
        `key` region(s) on `device` in that step; median_rank and median_s, the median
        rank (the lower median for an even number of ranks, so that with two ranks the
        lag is their difference); lag_s = slowest_s - median_s; n_ranks that recorded
        the step. A step's duration is the sum of its `key` regions on that rank.
        Raises ValueError when no rank recorded `key` on `device`."""
        pd = _pandas()
        np = _numpy()
        per = self._per_step_rank(key, device)
        step = per["step"].to_numpy()
        rank = per["rank"].to_numpy()
        seconds = per["seconds"].to_numpy()
        # By step, then duration; among equal durations the lowest rank counts as slower.
        order = np.lexsort((-rank, seconds, step))
        step, rank, seconds = step[order], rank[order], seconds[order]
        starts = np.flatnonzero(np.r_[True, step[1:] != step[:-1]])
        counts = np.diff(np.r_[starts, len(step)])
        last = starts + counts - 1
        middle = starts + (counts - 1) // 2
        out = pd.DataFrame({"slowest_rank": rank[last], "slowest_s": seconds[last],
                            "median_rank": rank[middle], "median_s": seconds[middle],
                            "lag_s": seconds[last] - seconds[middle], "n_ranks": counts},
                           index=pd.Index(step[starts], name="step"))
        return out

    def _per_step_rank(self, key, device):
        """Long form: step, rank, seconds (sum of the step's regions)."""
        key = _key_name(key)
        device = str(device).upper()
        regions = self.regions
        mask = ((regions["key"] == key) & (regions["device"] == device)).to_numpy()
        if not mask.any():
            recorded = sorted({f"{k} ({d})" for k, d in
                               regions[["key", "device"]].drop_duplicates().itertuples(
                                   index=False)})
            raise ValueError(f"{self.dir}: no rank recorded the region \"{key}\" on {device} "
                             f"(recorded: {', '.join(recorded) if recorded else 'none'})")
        chosen = regions.loc[mask, ["step", "rank", "duration_ns"]]
        per = chosen.groupby(["step", "rank"], sort=True)["duration_ns"].sum().reset_index()
        per["seconds"] = per.pop("duration_ns") * 1e-9
        return per


def _numpy():
    import numpy  # pylint: disable=import-outside-toplevel
    return numpy


def read_run(path):
    """The run directory `path` as a Run (see Run): info, params, tags, ranks, launchers,
    and, read on first access, regions, metrics, hardware and summaries DataFrames.

    Raises FileNotFoundError for a path that is no run (no directory, no run.json) and
    ValueError naming the file and what is wrong for a damaged one (also a rank that ended
    with regions in its summary but no region row on disk). Damage that leaves the run
    readable is a TrainscopeWarning each, kept in Run.warnings. A line cut short at
    the end of a CSV file (a run in progress, or a crash during a write) is ignored."""
    return Run(path)


# --- search_runs ---------------------------------------------------------------

# The columns before params and tags (C++: kRunFilterAttributes, trainscope/run/run_filter.hpp).
_ATTRIBUTES = ("run_id", "name", "experiment", "status", "start_time", "end_time", "duration_s",
               "world_size", "dir")


_LEDGER_COLUMNS = ("ledger.tokens_per_s", "ledger.samples_per_s", "ledger.mfu")


def _typed_row(row, keys, stat):
    """The C++ row of a run (_RunReader.filter_row: every value as text) with the types of
    search_runs' columns: times as UTC Timestamps, numbers as float, world_size as int;
    regions.<KEY>.<stat> for `keys` only (NaN where the run has none)."""
    pd = _pandas()
    end = row.get("end_time")
    out = {"run_id": row["run_id"], "name": row["name"], "experiment": row["experiment"],
           "status": row["status"],
           "start_time": pd.Timestamp(int(row["start_time"]), unit="ms", tz="UTC"),
           "end_time": pd.NaT if end is None else pd.Timestamp(int(end), unit="ms", tz="UTC"),
           "duration_s": float(row.get("duration_s", "nan")),
           "world_size": int(row["world_size"]), "dir": row["dir"]}
    for prefix in ("params.", "tags."):
        out.update(sorted((k, v) for k, v in row.items() if k.startswith(prefix)))
    for key in keys:
        column = f"regions.{key}.{stat}"
        out[column] = float(row.get(column, "nan"))
    out.update((k, float(v)) for k, v in row.items() if k.startswith("metrics."))
    out.update((k, float(v)) for k, v in row.items() if k.startswith("ledger."))
    return out


# pylint: disable-next=redefined-builtin
def search_runs(root, filter=None, keys=("BATCH", "EPOCH"), stat="median", device="CPU"):
    """One DataFrame row per run under `root` (each subdirectory with a run.json;
    `root` itself when it is a run), newest start_time first, as mlflow.search_runs:

    run_id, name, experiment, status, start_time, end_time (UTC Timestamps), duration_s,
    world_size, dir, then params.<k> and tags.<k> (str; NaN where a run has none), then
    regions.<KEY>.<stat> for each of `keys`: the summaries' `stat` (a numeric field of
    trainscope.TimeStats: count, total, min, mean, median, max, stdev, p5, p25, p75, p95,
    p99, cv, median_ci_low, median_ci_high, warmup_excluded) of region KEY on `device`,
    durations in seconds, the mean over ranks (NaN where no rank has it), then
    metrics.<k> for each metric the runs logged (log_metric): its last value (each
    rank's last, the mean over ranks; NaN where a run has none), then
    ledger.tokens_per_s, ledger.samples_per_s and ledger.mfu: the efficiency ledger's
    figures (trainscope.ledger, docs/ledger.md) of the runs that recorded work per step
    (metrics.work/samples or metrics.work/tokens; derived by the ledger's reader, which
    reads their steps; NaN where a run has none).

    root: a run, a directory of runs, or a sweep directory (its runs/), as every command
    takes them; a directory without a run gives an empty DataFrame and a TrainscopeWarning
    saying why.

    filter: None, a callable taking a row (dict of the columns above; params and tags
    the run does not have are absent) and returning whether to keep it, or a string of
    comparisons joined by `and`: `column op literal`, op one of = != < > <= >=, e.g.
    "params.lr = '0.1' and status = 'FINISHED' and regions.BATCH.median < 0.5 and
    metrics.loss < 0.2 and ledger.tokens_per_s > 1000".
    A quoted literal compares as a string, a number numerically; a run without the
    column never matches. Column names as above (also `attributes.status`), and
    regions.<KEY>.<stat> of any key and statistic on `device` (not only `keys` and `stat`);
    quote names with spaces in backticks: params.`batch size`. A bad filter is a ValueError.
    The row and the filter are C++'s (trainscope/run/run_filter.hpp), the same as
    `trainscope compare --root R --a FILTER`'s.

    A damaged run (a run.json, rank or launcher file damaged or lost, region rows lost:
    what read_run raises for) is skipped with a TrainscopeWarning naming it and the error;
    read_run's warnings (a regions file cut short, a damaged summary, whose rank's
    statistics are then NaN) are TrainscopeWarnings too."""
    pd = _pandas()
    keys = [_key_name(k) for k in ([keys] if isinstance(keys, (str, enum.Enum)) else keys or ())]
    if stat not in _STATISTICS:
        raise ValueError(f"unknown statistic {stat!r} (one of {', '.join(_STATISTICS)})")
    device = str(device).upper()
    if device not in ("CPU", "GPU"):
        raise ValueError(f"unknown device {device!r} (CPU or GPU)")
    # A string filter is parsed and evaluated by the C++ run filter (run_filter.hpp), on the
    # run's row as C++ builds it: the one filter of search_runs and `trainscope compare`.
    text_filter = None
    if filter is not None and not callable(filter):
        if not isinstance(filter, str):
            raise TypeError(f"filter must be a string or a callable, not {type(filter).__name__}")
        text_filter = _core()._RunFilter(filter) if filter.strip() else None

    root = os.fspath(root)
    if not os.path.isdir(root):
        raise FileNotFoundError(f"{root}: no such directory of runs")
    # A run, a directory of runs, a sweep's (its runs/): the one resolver every command
    # uses. Directories with run files but no run.json too: a damaged run is skipped by
    # name below. A directory without any run is an empty result that says why.
    try:
        dirs = _core().find_run_dirs(root)
    except FileNotFoundError as error:
        warnings.warn(f"search_runs: {error}", _warning_category(), stacklevel=2)
        dirs = []
    rows = []
    for directory in dirs:
        try:
            run = Run(directory)  # read_run's checks and warnings
            text = run._reader.filter_row(device)  # pylint: disable=protected-access
        except (ValueError, OSError) as error:
            warnings.warn(f"{directory}: skipped: {error}", _warning_category(), stacklevel=2)
            continue
        if text_filter is not None and not text_filter.matches(text):
            continue
        row = _typed_row(text, keys, stat)
        if callable(filter) and not filter(dict(row)):
            continue
        rows.append(row)
    params = sorted({c for r in rows for c in r if c.startswith("params.")})
    tags = sorted({c for r in rows for c in r if c.startswith("tags.")})
    metrics = sorted({c for r in rows for c in r if c.startswith("metrics.")})
    ledger = [c for c in _LEDGER_COLUMNS if any(c in r for r in rows)]
    columns = (list(_ATTRIBUTES) + params + tags + [f"regions.{k}.{stat}" for k in keys] +
               metrics + ledger)
    frame = pd.DataFrame(rows, columns=columns)
    if len(frame):
        frame = frame.sort_values("start_time", ascending=False, kind="stable")
        frame = frame.reset_index(drop=True)
    return frame


def _warning_category():
    from trainscope._core import TrainscopeWarning  # pylint: disable=import-outside-toplevel
    return TrainscopeWarning
