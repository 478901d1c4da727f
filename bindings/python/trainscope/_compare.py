"""trainscope.compare: is B faster than A, by how much, and can CI trust the answer.

The same call as `trainscope compare A B` (compare::compare in C++): per region key and
device and per metric, the medians of A and B, the ratio B/A with its interval, a
p-value and a verdict, as a pandas DataFrame. docs/compare.md describes it and
docs/compare-statistics.md the method.
"""

import os as _os

from trainscope import _core

__all__ = ["compare", "failing_rows"]

_COLUMNS = ["config", "quantity", "kind", "device", "median_a", "median_b", "ratio", "low",
            "high", "p_value", "verdict", "unit", "n_a", "n_b", "warmup_a", "warmup_b",
            "more_a", "more_b", "p99_a", "p99_b", "max_a", "max_b", "note", "reason"]


def _specs(side, name):
    if isinstance(side, (str, bytes)) or hasattr(side, "__fspath__"):
        return [_os.fsdecode(_os.fspath(side))]
    directory = getattr(side, "dir", None)  # trainscope.read_run(...), an ActiveRun
    if directory is not None:
        return [_os.fspath(directory)]
    try:
        items = list(side)
    except TypeError:
        raise TypeError(f"{name}: a run directory, glob, folder of runs or saved comparison "
                        f"(str or os.PathLike), a Run, or a list of them; not "
                        f"{type(side).__name__}") from None
    out = []
    for item in items:
        out.extend(_specs(item, name))
    if not out:
        raise ValueError(f"{name}: an empty list of runs")
    return out


def _row(config, row):
    """A DataFrame row from a typed _core.CompareRow."""
    out = {"config": config, "quantity": row.name}
    out.update({k: getattr(row, k) for k in _COLUMNS[2:]})
    return out


def compare(a=None, b=None, *, root=None, keys=None, metrics=None, rank=None, threshold=0.02,
            confidence=0.95, min_steps=50, resamples=2000, warmup=True, run_noise=0.015,
            save=None, force=False, run=None, repeat=5, warmup_runs=0, max_time=None):
    """Compares B with A; returns a DataFrame, one row per quantity (and configuration).

    run=("CMD_A", "CMD_B") (`trainscope compare --run A --run B`): runs the two shell
        commands alternately (A B B A ...) under `trainscope run` into root (default
        "trainscope-compare"), at most repeat runs a side after warmup_runs each, none
        started past max_time seconds, and compares them with the run as the unit, stopping
        once decided (docs/compare-statistics.md); a and b are then not given.
        df.attrs["order"] is the order they ran, df.attrs["stop"] why it stopped.

    a, b: each a run directory, a glob of them, a folder of runs (repetitions, or a
        sweep whose configurations are matched on their params), a saved comparison
        (save=...; "FILE.json" is its B side, "FILE.json:a" its A side), a Run, or a list
        of these. With root=DIR, a and b are filters over the runs in DIR in search_runs'
        syntax: compare("params.workers = '0'", "params.workers = '2'", root="runs").
    keys: compare only these region keys or metrics (default: all on both sides).
    metrics: logged metrics (log_metric) or host metrics ("system/...") to compare too;
        "throughput" (steps/s) and "data-wait" (the data wait's share of the step) are
        always there when the runs have a step key (and IO).
    rank: compare this rank (default: per step the slowest rank's time).
    threshold: the margin of "same" (0.02: the interval inside +-2%); confidence: the
        intervals' level; min_steps: fewest steps a side keeps after warm-up; warmup:
        drop each run's warm-up (MSER-5); run_noise: how much one job's median varies from
        run to run (0.015: 1.5% per run), which one run a side cannot show and the
        intervals of single runs include (several runs a side measure it); save: also write the comparison with its data
        to this path (a baseline for later comparisons): never onto an input (ValueError,
        naming it), nor onto an existing file unless force=True (FileExistsError).

    Columns: config, quantity, kind ("region"/"metric"), device, median_a, median_b,
    ratio (B/A), low, high (the interval), p_value, verdict (slower/faster/same/
    inconclusive; for metrics higher/lower/same/inconclusive), unit ("steps" or "runs"),
    n_a, n_b, warmup_a, warmup_b, more_a, more_b (steps or runs that would decide an
    inconclusive one), p99_a, p99_b, max_a, max_b (the tails), note (a stall, named),
    reason. df.attrs holds "overall" (a dict per configuration: its overall verdict and
    basis), "warnings" and "document" (the JSON, for failing_rows()).

    Raises ValueError naming the side and the run for input that cannot be compared
    (no runs, no steps, nothing in common, a damaged run or document), FileNotFoundError
    for a missing one.
    """
    import pandas as pd

    if run is not None:
        if a is not None or b is not None:
            raise TypeError("run=(A, B) compares the runs it makes: give no a or b")
        if isinstance(run, str) or len(run) != 2:
            raise TypeError("run: two shell commands, A's and B's")
        if isinstance(repeat, bool) or int(repeat) != repeat or repeat < 2:
            raise ValueError(f"repeat: at least 2 runs a side, got {repeat!r}")
        if isinstance(warmup_runs, bool) or int(warmup_runs) != warmup_runs or warmup_runs < 0:
            raise ValueError(f"warmup_runs: a whole number >= 0, got {warmup_runs!r}")
        if max_time is not None and not max_time > 0:
            raise ValueError(f"max_time: seconds above 0, got {max_time!r}")
        request = _core.CompareRequest(
            keys=[keys] if isinstance(keys, str) else list(keys or []),
            threshold=float(threshold), confidence=float(confidence), min_steps=int(min_steps),
            resamples=int(resamples), warmup=bool(warmup), run_noise=float(run_noise))
        result, order, looks, look_confidence, final_confidence, stop = _core._run_and_compare(
            request, str(run[0]), str(run[1]),
            "trainscope-compare" if root is None else _os.fsdecode(_os.fspath(root)),
            int(repeat), int(warmup_runs), 0.0 if max_time is None else float(max_time))
        df = _frame(result, pd)
        df.attrs.update(order=list(order), looks=looks, look_confidence=look_confidence,
                        final_confidence=final_confidence, stop=stop)
        return df
    if a is None or b is None:
        raise TypeError("compare() needs a and b (or run=(A, B))")
    filtered = root is not None
    if filtered:
        if not isinstance(a, str) or not isinstance(b, str):
            raise TypeError("with root=..., a and b are filter strings "
                            "(\"params.workers = '0'\")")
        specs_a, specs_b, filter_a, filter_b = [], [], a, b
        root = _os.fsdecode(_os.fspath(root))
    else:
        specs_a, specs_b, filter_a, filter_b = _specs(a, "a"), _specs(b, "b"), "", ""
        root = ""
    keys = [keys] if isinstance(keys, str) else list(keys or [])
    metrics = [metrics] if isinstance(metrics, str) else list(metrics or [])
    if rank is not None and (isinstance(rank, bool) or int(rank) != rank or rank < 0):
        raise ValueError(f"rank: a whole number >= 0, got {rank!r}")
    if not 0 < threshold:
        raise ValueError(f"threshold: a share above 0 (0.02 is 2%), got {threshold!r}")
    if not 0 <= run_noise < 1:
        raise ValueError(f"run_noise: a share in [0, 1) (0.005 is 0.5%), got {run_noise!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: between 0 and 1, got {confidence!r}")
    request = _core.CompareRequest(
        a=specs_a, b=specs_b, root=root, filter_a=filter_a, filter_b=filter_b, keys=keys,
        metrics=metrics, rank=None if rank is None else int(rank), threshold=float(threshold),
        confidence=float(confidence), min_steps=int(min_steps), resamples=int(resamples),
        warmup=bool(warmup), run_noise=float(run_noise))
    result = _core._compare(request, None if save is None else _os.fsdecode(_os.fspath(save)),
                            bool(force))
    return _frame(result, pd)


def _frame(result, pd):
    """The DataFrame of a typed _core.Comparison."""
    rows, overall, warnings = [], [], list(result.warnings)
    for pair in result.pairs:
        rows.extend(_row(pair.config, row) for row in pair.rows)
        entry = _row(pair.config, pair.overall)
        entry["basis"] = pair.overall_basis
        entry["runs_a"], entry["runs_b"] = list(pair.runs_a), list(pair.runs_b)
        entry["contention_a"], entry["contention_b"] = pair.contention_a, pair.contention_b
        entry["step_wait_a"], entry["step_wait_b"] = pair.step_wait_a, pair.step_wait_b
        overall.append(entry)
        prefix = f"[{pair.config}] " if pair.config else ""
        warnings.extend(prefix + w for w in pair.warnings)
    df = pd.DataFrame(rows, columns=_COLUMNS)
    df.attrs["overall"] = overall
    df.attrs["warnings"] = warnings
    # Plain text, not the typed object: pandas copies attrs deeply on many operations.
    df.attrs["document"] = result.to_json()
    return df


def failing_rows(comparison, pct, keys=None):
    """`--fail-if-slower PCT` on a compare() result: the quantities slower than PCT percent
    with confidence (a time's interval's lower bound above 1 + PCT/100; a throughput's,
    `tokens/s` or `throughput`, upper bound below 1 / (1 + PCT/100)): the given keys, else
    the overall step time and the `tokens/s` row. An empty list passes; noise (an
    inconclusive or `same` comparison) never fails."""
    keys = [keys] if isinstance(keys, str) else list(keys or [])
    typed = _core._parse_comparison(comparison.attrs["document"])
    return list(_core._failing_rows(typed, keys, float(pct)))
