"""The diagnosis of a run, live or finished, from Python: what its steps are made of
(data wait, host-to-device, forward, backward, optimizer, communication, the rest)
on every rank, and labels with their statistical evidence and a next step
(include/trainscope/diagnosis/diagnosis.hpp; docs/diagnosis.md)::

    import trainscope

    d = trainscope.diagnose("trainscope-runs/20240601-120000-ab12")
    print(d.headline())                 # "INPUT-BOUND"
    label = d.run.find("INPUT-BOUND")
    label.value.value, label.value.low  # the data-wait share and its 95% interval
    d.phases_frame()                    # the run's phase table (pandas)
    d.to_json()                         # what `trainscope diagnose RUN --json` prints

The result is the C++ result itself (the same names): the run is read and
concluded by the C++ room, with the GIL released.
"""

import collections as _collections
import os as _os

from trainscope import _core

__all__ = [
    "Diagnosis",
    "Interval",
    "Label",
    "LABELS",
    "PHASES",
    "PhaseRow",
    "Scope",
    "THRESHOLDS",
    "Threshold",
    "diagnose",
    "parse_diagnosis",
    "read_diagnosis",
]

Diagnosis = _core.Diagnosis
Scope = _core.Scope
Label = _core.Label
Interval = _core.Interval
PhaseRow = _core.PhaseRow

Threshold = _collections.namedtuple("Threshold", ["name", "default", "meaning"])
# Every threshold by name, in the C++ table's order (diagnosis::threshold_table()):
# its default and what it means. diagnose(thresholds={name: value}) overrides them.
THRESHOLDS = {name: Threshold(name, default, meaning)
              for name, default, meaning in _core._DIAGNOSIS_THRESHOLDS}
# The parts of a step ("data_wait", ..., "rest"), the names of PhaseRow.phase and
# of diagnose(phases={...}).
PHASES = tuple(_core._DIAGNOSIS_PHASES)
# Every label name.
LABELS = tuple(_core._DIAGNOSIS_LABELS)


def _run_dir(run):
    if isinstance(run, (str, bytes)) or hasattr(run, "__fspath__"):
        path = _os.fspath(run)
        return _os.fsdecode(path)
    directory = getattr(run, "dir", None)  # trainscope.read_run(...), an ActiveRun
    if directory is None:
        raise TypeError(f"run: a run directory (str or os.PathLike) or a Run with .dir, "
                        f"not {type(run).__name__}")
    return _os.fspath(directory)


def _phase_specs(phases):
    if phases is None:
        return []
    if not hasattr(phases, "items"):
        raise TypeError(f"phases: a dict {{PHASE: KEY}} such as {{'optimizer': 'opt_step'}}, "
                        f"not {type(phases).__name__}")
    specs = []
    for phase, keys in phases.items():
        for key in [keys] if isinstance(keys, str) else list(keys):
            specs.append(f"{phase}={key}")
    return specs


def _threshold_items(thresholds):
    if thresholds is None:
        return []
    if not hasattr(thresholds, "items"):
        raise TypeError(f"thresholds: a dict {{NAME: VALUE}} such as "
                        f"{{'input_bound_share': 0.3}}, not {type(thresholds).__name__}")
    items = []
    for name, value in thresholds.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"thresholds: {name}={value!r} is not a number") from None
        items.append((str(name), number))
    return items


def diagnose(run, *, window=100, phases=None, thresholds=None):
    """The diagnosis of a run directory, live or finished (diagnosis::diagnose_run).

    run: the run directory (str or os.PathLike), or a Run (trainscope.read_run) or
        ActiveRun: its .dir.
    window: K, the steps of the sliding window (d.window); d.run is the whole run.
    phases: which region keys mean which phase, {PHASE: KEY or [KEYS]}: {"optimizer":
        "opt_step"} (as `--phase optimizer=opt_step`); "step" names the step key.
        PHASE is one of PHASES ("io" and "input" mean data_wait).
    thresholds: {NAME: VALUE} overriding THRESHOLDS by name.

    Raises ValueError naming an unknown phase or threshold (or a bad value),
    FileNotFoundError when the directory does not exist, ValueError or
    RuntimeError naming the run when it is no run or cannot be read.
    """
    if isinstance(window, bool) or int(window) != window or window < 1:
        raise ValueError(f"window: a whole number of steps >= 1, got {window!r}")
    return _core._diagnose(_run_dir(run), int(window), _phase_specs(phases),
                           _threshold_items(thresholds))


def read_diagnosis(path):
    """A diagnosis document (`trainscope diagnose RUN --json > PATH`, or
    Diagnosis.to_json() saved) read back as a Diagnosis (diagnosis::read_diagnosis).
    Errors name the file and the key."""
    return _core._read_diagnosis(_os.fspath(path))


def parse_diagnosis(text, source="<string>"):
    """A diagnosis document's text as a Diagnosis; errors name `source` and the key."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return _core._parse_diagnosis(text, source)


_PHASE_COLUMNS = ["phase", "device", "median_s", "p95_s", "share", "median_rank_s",
                  "worst_rank_s", "worst_rank", "skew"]


def _scope_phases_frame(self):
    """The phase table as a pandas DataFrame, one row per phase and device:
    phase, device, median_s, p95_s, share, median_rank_s, worst_rank_s, worst_rank, skew."""
    import pandas  # pylint: disable=import-outside-toplevel

    return pandas.DataFrame([[getattr(row, c) for c in _PHASE_COLUMNS] for row in self.phases],
                            columns=_PHASE_COLUMNS)


def _diagnosis_phases_frame(self, scope="run"):
    """The phase table of d.run (scope="run") or d.window (scope="window") as a pandas
    DataFrame (Scope.phases_frame())."""
    if scope not in ("run", "window"):
        raise ValueError(f"scope: 'run' or 'window', got {scope!r}")
    return getattr(self, scope).phases_frame()


def _diagnosis_summary(self):
    """The compact end-of-run summary `trainscope run` prints on stderr."""
    return _core._format_run_summary(self)


Scope.phases_frame = _scope_phases_frame
Diagnosis.phases_frame = _diagnosis_phases_frame
Diagnosis.summary = _diagnosis_summary
