#!/usr/bin/env python3
"""How close `trainscope stalls` comes to the truth built into its test jobs, on a
quiet machine and beside a CPU burner, measured in the same run of this script.

    TRAINSCOPE_CLI=BUILD/tools/trainscope PYTHONPATH=BUILD/python \\
    TRAINSCOPE_STALLS_LOOP=BUILD/examples/stalls_loop \\
        python3 bench/stalls_accuracy.py [--rounds 3] [--burn 2] [--json OUT] [-k EXPR]

tests/python/test_stalls.py checks these figures with bounds that hold beside other
load (a busy CI machine) yet fail a wrong analysis; the tight figures are here. Each
round runs the accuracy tests of that file twice with pytest, once alone and once
beside --burn processes that spin on the CPU (niced 0; the quiet and loaded rounds
alternate, so slow drifts of the machine fall on both), and reads what each test
recorded (`record_property`). Per figure it prints the median and the worst, quiet and
loaded, against the goal docs/stalls.md states:

  prep share     the differential prep stall against the share the run's own clocks
                 imply (decode log, loop's IO waits): within 5 points
  live vs diff   the live share of the cold run against prep + fetch: within 5 points
  what-ifs       predicted over measured samples/s (workers, cache, GPUs): within 15%

A failed test (its loose bound, or the run itself) is counted and named, its
figures kept where it recorded them. Also prints the load average around each round.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests", "python", "test_stalls.py")
SELECT = "known_share or what_if or cpp_loop"

# figure -> (how to read it from a test's properties, the goal, what it is)
FIGURES = {
    "prep share, no workers": (
        "test_differential_prep_stall_matches_the_known_share[0]",
        lambda p: abs(p["measured_prep_share"] - p["known_prep_share"]), 0.05, "points"),
    "prep share, 2 workers": (
        "test_differential_prep_stall_matches_the_known_share[2]",
        lambda p: abs(p["measured_prep_share"] - p["known_prep_share"]), 0.05, "points"),
    "prep share, C++ loop": (
        "test_a_cpp_loop_under_trainscope_stalls",
        lambda p: abs(p["cpp_measured_prep_share"] - p["cpp_known_prep_share"]), 0.05, "points"),
    "live vs diff, no workers": (
        "test_differential_prep_stall_matches_the_known_share[0]",
        lambda p: abs(p["live_minus_differential"]), 0.05, "points"),
    "live vs diff, 2 workers": (
        "test_differential_prep_stall_matches_the_known_share[2]",
        lambda p: abs(p["live_minus_differential"]), 0.05, "points"),
    "workers what-if (2 from 1)": (
        "test_worker_what_if_predicts_an_unmeasured_worker_count",
        lambda p: p["predicted_samples_per_s_2_workers"] / p["measured_samples_per_s_2_workers"],
        0.15, "ratio"),
    "cache what-if (half cached)": (
        "test_cache_what_if_predicts_a_half_cached_run",
        lambda p: p["cache_predicted_half_samples_per_s"] / p["cache_measured_half_samples_per_s"],
        0.15, "ratio"),
    "GPU what-if (2 sharing)": (
        "test_gpu_what_if_predicts_two_gpus_sharing_the_loader",
        lambda p: p["gpu_predicted_2_samples_per_s"] / p["gpu_measured_2_samples_per_s"],
        0.15, "ratio"),
}


def _loadavg():
    try:
        with open("/proc/loadavg", encoding="utf-8") as f:
            return f.read().split()[0]
    except OSError:
        return "?"


def _run_tests(select, xml_path):
    """pytest on the accuracy tests; {test name: (passed, {property: float})}."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-o", "junit_family=legacy", f"--junitxml={xml_path}", "-k", select,
                           TESTS], capture_output=True, text=True, check=False)
    if not os.path.exists(xml_path):
        raise SystemExit(f"pytest wrote no report (exit {done.returncode}):\n"
                         f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    out = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        passed = case.find("failure") is None and case.find("error") is None
        if case.find("skipped") is not None:
            continue
        props = {}
        for p in case.iter("property"):
            try:
                props[p.get("name")] = float(p.get("value"))
            except (TypeError, ValueError):
                pass
        out[case.get("name")] = (passed, props)
    return out


def _burners(count):
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def _stop(procs):
    for proc in procs:
        proc.kill()
        proc.wait()


def _value(unit, v):
    return f"{100 * v:.1f} pt" if unit == "points" else f"{v:.3f}"


def _off(unit, v):
    """How far from the truth: points, or |ratio - 1|."""
    return v if unit == "points" else abs(v - 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--burn", type=int, default=2, help="CPU burners beside the loaded runs")
    parser.add_argument("--json", help="write every round's figures here")
    parser.add_argument("-k", dest="select", default=SELECT, help="pytest -k of the tests to run")
    args = parser.parse_args()
    if not os.environ.get("TRAINSCOPE_CLI"):
        raise SystemExit("set TRAINSCOPE_CLI to the trainscope binary (and PYTHONPATH)")

    figures = {cond: {name: [] for name in FIGURES} for cond in ("quiet", "loaded")}
    failures = {"quiet": [], "loaded": []}
    rounds = []
    with tempfile.TemporaryDirectory(prefix="stalls-accuracy-") as tmp:
        for r in range(args.rounds):
            for cond in ("quiet", "loaded"):
                before = _loadavg()
                procs = _burners(args.burn) if cond == "loaded" else []
                try:
                    results = _run_tests(args.select, os.path.join(tmp, f"{cond}-{r}.xml"))
                finally:
                    _stop(procs)
                print(f"round {r + 1} {cond:<6}: load average {before} -> {_loadavg()}, "
                      f"{sum(ok for ok, _ in results.values())}/{len(results)} tests passed",
                      flush=True)
                rounds.append({"round": r + 1, "condition": cond,
                               "tests": {k: {"passed": ok, "properties": p}
                                         for k, (ok, p) in results.items()}})
                for name, (ok, _) in results.items():
                    if not ok:
                        failures[cond].append(name)
                for name, (test, read, _, _) in FIGURES.items():
                    if test in results:
                        try:
                            figures[cond][name].append(read(results[test][1]))
                        except KeyError:  # the test failed before recording it
                            pass

    print(f"\nstalls accuracy, {args.rounds} rounds, loaded = beside {args.burn} CPU burners "
          f"({os.cpu_count()} CPUs); median [worst]; goal")
    print(f"{'figure':<28} {'quiet':>22} {'loaded':>22}   goal")
    for name, (_, _, goal, unit) in FIGURES.items():
        cells = []
        for cond in ("quiet", "loaded"):
            values = figures[cond][name]
            if not values:
                cells.append(f"{'-':>22}")
                continue
            worst = max(values, key=lambda v: _off(unit, v))
            cells.append(f"{_value(unit, statistics.median(values)):>10} "
                         f"[{_value(unit, worst)}]".rjust(22))
        goal_text = f"<= {100 * goal:.0f} pt" if unit == "points" else f"1 +- {goal:.2f}"
        print(f"{name:<28} {cells[0]} {cells[1]}   {goal_text}")
    for cond in ("quiet", "loaded"):
        if failures[cond]:
            print(f"failed ({cond}): {', '.join(failures[cond])}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"rounds": rounds, "burners": args.burn, "cpus": os.cpu_count()}, f,
                      indent=1)


if __name__ == "__main__":
    main()
