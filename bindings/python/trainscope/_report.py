"""trainscope.report: one self-contained HTML page for a run, a sweep or a scaling study.

The same page as ``trainscope report`` (C++: trainscope/report/report.hpp)::

    import trainscope

    page = trainscope.report("trainscope-runs/<run-id>", output="run.html")
    page                       # in Jupyter: the page inline
    trainscope.report(["sweeps/lr"], output="sweep.html", scaling="batch_size")
    trainscope.report(["runs/base", "runs/new"], compare=True, output="compare.html")

Inputs are run directories, sweep directories (sweep.json), stalls analyses
(stalls.json of ``trainscope stalls --dataset``), directories that hold runs,
or runs from trainscope.read_run. A run that timed its loader
(``tmr.timed(loader)``) gets a data-stall section. With ``compare=True`` the inputs are
A and B of ``trainscope.compare`` (runs, globs, folders of runs, sweeps, a saved
comparison) and the page is their comparison. Errors are exceptions with the C++
message (naming the input and what is wrong): FileNotFoundError for a missing
path, ValueError for one that is no run, RuntimeError otherwise.
"""

import html as _html
import os as _os

from trainscope import _core

__all__ = ["Report", "report"]


class Report:
    """A report page: ``html`` (str), ``path`` (where it was written, or None).

    Jupyter shows it inline (an iframe holding the whole page, so its script and
    style stay apart from the notebook's); ``show()`` does the same explicitly.
    """

    def __init__(self, html, path=None, height=900):
        self.html = html
        self.path = path
        self.height = height

    def _repr_html_(self):
        return ('<iframe srcdoc="{}" style="width: 100%; height: {}px; border: 1px solid #ddd" '
                'sandbox="allow-scripts allow-popups"></iframe>').format(
                    _html.escape(self.html, quote=True), int(self.height))

    def show(self):
        """Displays the page inline in Jupyter/IPython (IPython.display)."""
        from IPython.display import HTML, display  # imported only when used
        display(HTML(self._repr_html_()))

    def __fspath__(self):
        if self.path is None:
            raise TypeError("this report was not written to a file (pass output=...)")
        return self.path

    def __repr__(self):
        where = self.path if self.path is not None else "not written"
        return f"<trainscope.Report {where}, {len(self.html.encode('utf-8')) / 1e6:.2f} MB>"


def _input_path(item):
    path = getattr(item, "dir", item)  # a trainscope.read_run() Run
    return _os.fspath(path)


def report(inputs, output=None, *, title=None, scaling=None, max_points=2000, progress=False,
           height=900, compare=False):
    """Builds the report page of ``inputs`` and writes it to ``output`` (if given).

    inputs: a run directory, a sweep directory, a directory of runs or a Run
        (trainscope.read_run), or a list of them; one run gives a run page,
        anything else a study page.
    output: the HTML file to write (replaced atomically); None keeps it in memory.
    title: default: the run's or sweep's name.
    scaling: the run param of the scaling study; default: the one numeric
        param that varies across the runs; "none" turns it off. Speedup,
        efficiency and cost are drawn only for a param named here (one that
        splits a fixed amount of work: ranks, GPUs, nodes).
    max_points: points per time series on the page (statistics use every row).
    progress: print progress lines to stderr while reading.
    height: the inline frame's height in Jupyter, in pixels.
    compare: the comparison page: ``inputs`` are exactly ``[a, b]``, each what
        ``trainscope.compare`` takes as a side (a run directory or Run, a glob, a folder
        of runs or a sweep, a saved comparison ``FILE.json`` or ``FILE.json:a``); per
        configuration the overall verdict, warnings, the table of every quantity, the
        step times of A and B and a forest chart of the ratios. Default title "B vs A".

    Returns a Report (``.html``, ``.path``; shown inline by Jupyter).
    """
    if isinstance(inputs, (str, bytes, _os.PathLike)) or hasattr(inputs, "dir"):
        inputs = [inputs]
    paths = [_input_path(item) for item in inputs]
    html = _core._render_report(paths, title or "", scaling or "", int(max_points),
                                bool(progress), bool(compare))
    path = None
    if output is not None:
        path = _os.fspath(output)
        # The C++ writer (as `trainscope report`): a temporary file, fsync, rename, fsync of
        # the directory; an error names the path and leaves an existing page as it was.
        _core._write_report_page(html, path)
    page = html.decode("utf-8")
    return Report(page, path, height)
