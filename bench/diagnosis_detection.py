#!/usr/bin/env python3
"""Detection and false-alarm rates of the diagnosis's labels on jobs whose truth is
known by construction (tests/python/diagnosis_jobs/, the cases of
tests/python/test_diagnosis.py).

    TRAINSCOPE_CLI=BUILD/tools/trainscope PYTHONPATH=BUILD/python \\
        python3 bench/diagnosis_detection.py [--reps 20] [--cases input,steady] [--json OUT]

Runs each case --reps times under `trainscope run` (one after the other, as the
machine is), diagnoses each run with trainscope.diagnose and reports, for each
case's label:

  detected   the label in the run scope with its kind and rank (the detection rate)
  numbers    ... and its value within the case's margin of the built-in quantity
             (data-wait share within 5 points, lag and memory slope within 20%)

and, for the jobs without a defect (steady: a compute-bound job whose backbone
runs "on a GPU", a wait, so its step time is steady whatever else runs; compute:
the same with the backbone's matmuls on the CPU, whose step time follows the
machine's other load), how often each other label was raised (the false-alarm
rate; the defects INPUT-BOUND, STRAGGLER, MEMORY-CREEP, THROUGHPUT-DRIFT are the
ones that must stay under 5%). The goal:
>= 95% detection, <= 5% false alarms. Runs that fail are counted and shown, never
dropped silently. Also prints the machine's load average before and after.
"""

import argparse
import collections
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python", "diagnosis_jobs"))
import diagnosis_cases as cases  # noqa: E402

DETECTION_GOAL = 0.95
FALSE_ALARM_GOAL = 0.05
# The jobs without a defect: their labels other than COMPUTE-BOUND are false alarms.
FALSE_ALARM_CASES = {
    "steady": "the steady job (its backbone a wait, as on a GPU: steady whatever else runs)",
    "compute": "the CPU matmul job (its step time follows the machine's other load)",
}


def _label_record(label):
    return {"name": label.name, "kind": label.kind, "rank": label.rank,
            "quantity": label.quantity, "value": label.value.value, "low": label.value.low,
            "high": label.value.high, "threshold": label.threshold}


def run_once(trainscope, cli, case, root):
    began = time.monotonic()
    try:
        run_dir = cases.run(cli, case, root)
        d = trainscope.diagnose(run_dir)
    except Exception as error:  # pylint: disable=broad-except  (counted, shown)
        return {"case": case.name, "error": str(error)[-500:],
                "seconds": time.monotonic() - began}
    label = case.found(d)
    return {
        "case": case.name,
        "seconds": time.monotonic() - began,
        "status": d.status,
        "labels": [_label_record(l) for l in d.run.labels],
        "detected": label is not None,
        "numbers": label is not None and case.number_ok(label),
        "value": None if label is None else label.value.value,
        "wrong": case.check(d),
    }


def _pct(count, total):
    return f"{100.0 * count / total:5.1f}%" if total else "   n/a"


def report(results, reps):
    by_case = collections.defaultdict(list)
    for r in results:
        by_case[r["case"]].append(r)
    print()
    print(f"Detection on each case ({reps} runs each; goal >= {DETECTION_GOAL:.0%})")
    print(f"{'case':18} {'label':32} {'runs':>5} {'failed':>6} {'detected':>9} {'numbers':>9}"
          f"  {'built in':>9} {'median':>9} {'min':>9} {'max':>9}")
    for name, rs in by_case.items():
        case = cases.CASES[name]
        ok = [r for r in rs if "error" not in r]
        what = case.label + (f"({case.kind}" if case.kind else "") + \
            (f", rank {case.rank})" if case.rank is not None else (")" if case.kind else ""))
        values = sorted(r["value"] for r in ok if r["value"] is not None)
        expected = case.expected()
        stats = ("", "", "")
        if values:
            stats = (f"{values[len(values) // 2]:9.4g}", f"{values[0]:9.4g}", f"{values[-1]:9.4g}")
        print(f"{name:18} {what:32} {len(rs):5d} {len(rs) - len(ok):6d} "
              f"{_pct(sum(r['detected'] for r in ok), len(rs)):>9} "
              f"{_pct(sum(r['numbers'] for r in ok), len(rs)):>9}  "
              f"{'' if expected is None else format(expected, '9.4g'):>9} "
              f"{stats[0]:>9} {stats[1]:>9} {stats[2]:>9}")
    for name, what in FALSE_ALARM_CASES.items():
        steady = [r for r in by_case.get(name, []) if "error" not in r]
        if not steady:
            continue
        print()
        print(f"Labels raised on {what} ({name}, {len(steady)} runs; a defect's goal: "
              f"<= {FALSE_ALARM_GOAL:.0%})")
        raised = collections.Counter()
        for r in steady:
            for label in {l["name"] for l in r["labels"]}:
                raised[label] += 1
        for label in sorted(set(raised) | set(cases.DEFECTS)):
            role = "defect" if label in cases.DEFECTS else \
                ("expected" if label == cases.CASES[name].label else "other")
            print(f"  {label:20} {role:9} {raised[label]:3d}/{len(steady)}  "
                  f"{_pct(raised[label], len(steady))}")
    failures = [r for r in results if "error" in r or r.get("wrong")]
    if failures:
        print()
        print("Runs whose diagnosis missed the truth (or failed):")
        for r in failures:
            print(f"  {r['case']}: " + (r["error"].splitlines()[-1] if "error" in r
                                        else "; ".join(r["wrong"])))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--cases", default=",".join(cases.CASES),
                        help=f"comma-separated, of {', '.join(cases.CASES)}")
    parser.add_argument("--cli", default=os.environ.get("TRAINSCOPE_CLI"),
                        help="the trainscope binary (default $TRAINSCOPE_CLI)")
    parser.add_argument("--json", help="also write every run's result here")
    parser.add_argument("--keep", help="keep the runs under this directory")
    args = parser.parse_args()
    if not args.cli:
        parser.error("give --cli or set TRAINSCOPE_CLI to the trainscope binary")
    names = [n for n in args.cases.split(",") if n]
    unknown = [n for n in names if n not in cases.CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(cases.CASES)}")
    import trainscope  # pylint: disable=import-outside-toplevel  (after the usage errors)

    print(f"load average before: {os.getloadavg()}, {os.cpu_count()} CPUs")
    results = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="diagnosis-bench-") as scratch:
        base = args.keep or scratch
        # Interleaved (case after case, rep after rep), so a change in the machine's
        # load spreads over every case instead of hitting one.
        for rep in range(args.reps):
            for name in names:
                root = os.path.join(base, f"{name}-{rep:02d}")
                os.makedirs(root, exist_ok=True)
                r = run_once(trainscope, args.cli, cases.CASES[name], root)
                r["rep"] = rep
                results.append(r)
                mark = "error" if "error" in r else ("ok" if not r["wrong"] else "MISS")
                print(f"[{time.monotonic() - began:7.1f} s] {name} #{rep}: {mark} "
                      f"{[l['name'] for l in r.get('labels', [])]}", flush=True)
                if args.json:
                    with open(args.json, "w", encoding="utf-8") as f:
                        json.dump(results, f, indent=1)
    report(results, args.reps)
    print(f"\nload average after: {os.getloadavg()}; {time.monotonic() - began:.0f} s in all")


if __name__ == "__main__":
    main()
