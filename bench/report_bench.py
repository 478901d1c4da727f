#!/usr/bin/env python3
"""`trainscope report` on long runs: page size and time against the number of region rows.

For each --rows N (default 1e5, 1e6, 4e6) writes a finished two-rank run with N region
rows (4 keys, CPU and GPU, a 10x spike every 97th row; tests/python/run_files.write_run) and
N/4 hardware readings (so 4e6 rows come with 1e6 readings: the issue's 24-hour run), then
times `trainscope report RUN -o page.html --quiet` (wall clock, median of --repeats) and
prints rows, the run's size on disk, the page's size and the time. Targets for 4e6 rows:
a page of at most 10 MB, written in at most 10 s (--check makes missing one exit 1).

    python bench/report_bench.py --cli <build>/tools/trainscope [--rows 100000 1000000 4000000]
"""

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "python"))
from run_files import write_run  # noqa: E402  (the tests' writer of run directories)

KEYS = (("BATCH", "CPU"), ("BATCH", "GPU"), ("forward", "GPU"), ("data", "CPU"))
TARGET_MB = 10.0
TARGET_S = 10.0


def dir_size(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
               if os.path.isfile(os.path.join(path, f)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", default=os.environ.get("TRAINSCOPE_CLI", "trainscope"))
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000, 4_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", help="where to write the runs (default: a temporary directory)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args()

    root = args.dir or tempfile.mkdtemp(prefix="report-bench-")
    print(f"trainscope report bench: {platform.node()}, {os.cpu_count()} CPUs, {args.cli}")
    print(f"{'region rows':>12} {'hw readings':>12} {'run MB':>8} {'page MB':>8} {'seconds':>8} "
          f"{'rows/s':>10}")
    missed = []
    try:
        for rows in args.rows:
            run_dir = os.path.join(root, f"run-{rows}")
            if not os.path.exists(os.path.join(run_dir, "run.json")):
                write_run(run_dir, name=f"bench-{rows}", world_size=2, keys=KEYS,
                          rows_per_key=rows // (2 * len(KEYS)), hardware_samples=rows // 4)
            page = os.path.join(root, f"page-{rows}.html")
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                subprocess.run([args.cli, "report", run_dir, "-o", page, "--quiet"], check=True,
                               stdout=subprocess.DEVNULL)
                times.append(time.perf_counter() - start)
            seconds = statistics.median(times)
            page_mb = os.path.getsize(page) / 1e6
            print(f"{rows:>12,} {rows // 4:>12,} {dir_size(run_dir) / 1e6:>8.1f} {page_mb:>8.2f} "
                  f"{seconds:>8.2f} {rows / seconds:>10,.0f}")
            if rows >= 4_000_000 and (page_mb > TARGET_MB or seconds > TARGET_S):
                missed.append(f"{rows} rows: {page_mb:.2f} MB in {seconds:.2f} s "
                              f"(targets {TARGET_MB} MB, {TARGET_S} s)")
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    for line in missed:
        print("missed:", line)
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
