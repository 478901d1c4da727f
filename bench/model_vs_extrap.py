#!/usr/bin/env python3
"""Speed of `trainscope model` against Extra-P 4.2.5, whole processes side by side.

    python3 bench/model_vs_extrap.py --extrap VENV/bin/extrap --trainscope BUILD/tools/trainscope
                                     [--repeats 5] [--metrics 100] [--quick]

Inputs (Extra-P text files, written by tests/python/gen_extrap_inputs.py):
  1p: one parameter, METRICS REGION/METRIC blocks x 5 points x 5 repetitions
  2p: two parameters on a 5x5 grid (25 points x 5 repetitions), one metric
  2p: the same grid with METRICS blocks
Commands, each timed as a whole process (time.perf_counter around subprocess.run;
median of --repeats runs after one untimed warm-up run):
  extrap --text FILE --disable-progress
  trainscope model --modeler extrap FILE      (Extra-P's algorithm)
  trainscope model FILE                       (the default modeler)
Prints a table with the ratios extrap / trainscope; its first row is the start of the
processes alone (--version). Stdlib only.
"""

import argparse
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
sys.dont_write_bytecode = True  # nothing written into the source tree
import gen_extrap_inputs as gen  # noqa: E402


def _time(command, repeats, warmup):
    """Median wall time of `command` in seconds (raises on a failed run)."""
    def once():
        start = time.perf_counter()
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, check=False)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n"
                               f"{done.stderr.decode(errors='replace')[-2000:]}")
        return elapsed

    if warmup:
        once()
    return statistics.median(once() for _ in range(repeats))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extrap", required=True, help="the extrap command (of a venv with extrap==4.2.5)")
    parser.add_argument("--trainscope", required=True, help="the trainscope CLI binary")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per command (median)")
    parser.add_argument("--metrics", type=int, default=100, help="REGION/METRIC blocks of the large inputs")
    parser.add_argument("--quick", action="store_true", help="2 metrics, 1 run, no warm-up (a smoke test)")
    parser.add_argument("--work-dir", help="where the inputs are written (default: a temporary directory)")
    args = parser.parse_args(argv)
    if args.quick:
        args.metrics, args.repeats = 2, 1
    warmup = not args.quick and args.repeats > 1

    inputs = [
        (f"1 param, {args.metrics} metrics x 5 points x 5 reps", gen.many_metrics_case(args.metrics, 1)),
        ("2 params, 5x5 grid x 5 reps, 1 metric", gen.many_metrics_case(1, 2)),
        (f"2 params, 5x5 grid x 5 reps, {args.metrics} metrics", gen.many_metrics_case(args.metrics, 2)),
    ]
    commands = [
        ("extrap", lambda f: [args.extrap, "--text", f, "--disable-progress"]),
        ("trainscope --modeler extrap", lambda f: [args.trainscope, "model", "--modeler", "extrap", f]),
        ("trainscope (default)", lambda f: [args.trainscope, "model", f]),
    ]

    with tempfile.TemporaryDirectory(prefix="model-vs-extrap-") as tmp:
        work = args.work_dir or tmp
        # process start alone: Extra-P's interpreter and imports, trainscope's exec
        rows = [("start only (--version)", [_time([args.extrap, "--version"], args.repeats, warmup),
                                            _time([args.trainscope, "--version"], args.repeats, warmup),
                                            _time([args.trainscope, "--version"], args.repeats, warmup)])]
        for label, case in inputs:
            path = gen.write_case(case, work)
            times = [_time(make(path), args.repeats, warmup) for _, make in commands]
            rows.append((label, times))

    print(f"trainscope model vs Extra-P: whole processes, median of {args.repeats} run(s), seconds")
    headers = ["input"] + [name for name, _ in commands] + ["extrap / ts-extrap", "extrap / ts-default"]
    table = [headers]
    for label, (t_extrap, t_ts_extrap, t_ts) in rows:
        table.append([label, f"{t_extrap:.3f}", f"{t_ts_extrap:.3f}", f"{t_ts:.3f}",
                      f"{t_extrap / t_ts_extrap:.1f}x", f"{t_extrap / t_ts:.1f}x"])
    widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
    for r in table:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
