"""Data stalls: DS-Analyzer's differential analysis from Python, the call
`trainscope stalls --dataset PATH -- command...` makes
(trainscope::stalls::run_differential, include/trainscope/stalls/differential.hpp)::

    from trainscope import stalls

    analysis = stalls.run_differential(["python", "train.py"], "/data/train",
                                       iterations=100, vary={"num_workers": [2, 4]})
    print(analysis)                                   # what the command prints
    analysis["differential"]["prep_share"]            # DIR/stalls.json, as a dict

The command must iterate its data with ``for batch in tmr.timed(loader):`` (or
trainscope::stalls::timed in C++), which stops each run after W + N batches.
docs/stalls.md describes the runs and the arithmetic.
"""

import json as _json
import os as _os

from trainscope import _core

__all__ = ["DifferentialAnalysis", "run_differential"]


class DifferentialAnalysis:
    """A finished analysis: ``dir`` (its runs in dir/runs/), ``file`` (dir/stalls.json),
    ``data`` (that document as a dict; ``analysis[key]`` reads it too) and ``text``
    (what ``trainscope stalls --dataset`` prints; ``str(analysis)``)."""

    def __init__(self, directory, document, text):
        self.dir = directory
        self.file = _os.path.join(directory, "stalls.json")
        self.data = _json.loads(document)
        self.text = text

    def __getitem__(self, key):
        return self.data[key]

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"DifferentialAnalysis({self.dir!r})"


def run_differential(command, dataset, *, iterations=50, warmup=5, vary=None, dir=None,
                     progress=False):
    """Runs `command` (an argv list) as the analysis's runs (synthetic, cold, warm,
    loader, and one warm run per varied value), concludes, and stores dir/stalls.json.

    dataset: the files the loader reads (a directory or a file).
    iterations, warmup: N measured iterations after W thrown away, per run.
    vary: {KEY: [V1, V2]}: more warm runs with ``--KEY V`` appended to the command
        (loader workers: the what-if on the worker count).
    dir: the analysis directory; default ./trainscope-stalls/<local time>.
    progress: print a line per step to stderr, as the command does.

    Raises ValueError for bad arguments or a dataset without files, RuntimeError
    naming the run when a run failed, recorded no timed loader or ended early.
    """
    if isinstance(command, (str, bytes)):
        raise TypeError("command: a list of arguments (argv), not a string")
    vary_key, vary_values = "", []
    if vary:
        if len(vary) != 1:
            raise ValueError(f"vary: one KEY -> values, got {dict(vary)!r}")
        ((vary_key, vary_values),) = dict(vary).items()
        vary_values = [int(v) for v in vary_values]
        if not vary_values:
            raise ValueError(f"vary: no values for {vary_key!r}")
    directory, document, text = _core._run_differential(
        [_os.fspath(a) for a in command], _os.fspath(dataset), int(iterations), int(warmup),
        str(vary_key), vary_values, "" if dir is None else _os.fspath(dir), bool(progress))
    return DifferentialAnalysis(directory, document, text)
