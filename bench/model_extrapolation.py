#!/usr/bin/env python3
"""Held-out extrapolation error of `trainscope model` (both modelers) and of Extra-P itself.

    python3 bench/model_extrapolation.py --trainscope BUILD/tools/trainscope
                                         [--extrap VENV/bin/extrap] [--quick] [--seeds 1]

Cases with known functions in five families: weak scaling (growing with p), strong scaling
(shrinking with p, plus communication terms), constant, near-constant (a drift of a few percent
over the fit range) and additive two-parameter (p and q, each with its own term), measured
with multiplicative noise (5 repetitions; each noise level of --noise, by default 1 %, 3 % and
15 %) at p = 2, 4, 8, 16, 32 (two parameters: x q = 16 .. 256, the fit) and at the held-out
p = 64, 128, 256 (two parameters: at q = 512). Each mode fits the small points and predicts
the held-out ones:

  trainscope --modeler extrap   Extra-P's default modeler, reimplemented
  trainscope                    the default modeler (negative exponents; rejects
                                non-physical models)
  Extra-P 4.2.5                 Extra-P itself (tests/python/extrap_reference.py, run by the
                                python of the --extrap venv); left out without --extrap
  Extra-P, negative exponents   the same with allow_negative_exponents=True (the search space
                                of trainscope's default, without its physical-model check)

The error of a prediction is |predicted - measured| / measured, where measured is the mean of
the held-out repetitions. Reported per mode and family: the median and 90th percentile error
(over cases x held-out points), per held-out point, and how often a prediction is negative
(a time or a byte count cannot be); then one row per family and noise level with each mode's
median error. Stdlib only.
"""

import argparse
import json
import math
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]

REFERENCE = REPO / "tests" / "python" / "extrap_reference.py"
FIT_POINTS = (2, 4, 8, 16, 32)
HELD_OUT = (64, 128, 256)
FIT_Q = (16, 32, 64, 128, 256)
HELD_OUT_Q = 512
FAMILIES = ("weak", "strong", "constant", "near-constant", "additive-2p")
log2 = math.log2


def _weak():
    s = math.sqrt
    shapes = [
        ("linear", lambda a, b: lambda p: a + b * p),
        ("plogp", lambda a, b: lambda p: a + b * p * log2(p)),
        ("sqrt", lambda a, b: lambda p: a + b * s(p)),
        ("log", lambda a, b: lambda p: a + b * log2(p)),
        ("log2sq", lambda a, b: lambda p: a + b * log2(p) ** 2),
        ("p1.5", lambda a, b: lambda p: a + b * 0.1 * p ** 1.5),
        ("allreduce", lambda a, b: lambda p: a + b * log2(p) + 0.01 * b * p),
        ("p2", lambda a, b: lambda p: a + b * 0.01 * p ** 2),
        ("cbrt", lambda a, b: lambda p: a + b * p ** (1 / 3)),
    ]
    coefficients = [(1.0, 0.5), (20.0, 0.2)]
    return [(f"weak_{name}_{i}", shape(a, b)) for name, shape in shapes for i, (a, b) in enumerate(coefficients)]


def _strong():
    s = math.sqrt
    shapes = [
        ("inverse", lambda a, b: lambda p: a + b * 100 / p),
        ("inverse_only", lambda a, b: lambda p: b * 100 / p),
        ("inverse_sqrt", lambda a, b: lambda p: a + b * 30 / s(p)),
        ("amdahl_log", lambda a, b: lambda p: a + b * 100 / p + 0.05 * b * log2(p)),
        ("halo", lambda a, b: lambda p: a + b * 100 / p + b * 5 / p ** (2 / 3)),
        ("comm_linear", lambda a, b: lambda p: a + b * 100 / p + 0.002 * b * p),
        ("p-0.75", lambda a, b: lambda p: a + b * 50 / p ** 0.75),
        ("serial_heavy", lambda a, b: lambda p: 10 * a + b * 20 / p),
    ]
    coefficients = [(1.0, 1.0), (0.2, 3.0)]
    return [(f"strong_{name}_{i}", shape(a, b)) for name, shape in shapes for i, (a, b) in enumerate(coefficients)]


def _constant():
    return [(f"constant_{i}", (lambda a: lambda p: a)(a)) for i, a in enumerate((1.0, 20.0, 0.003, 5e6))]


def _near_constant():
    shapes = [
        ("drift_log", lambda a: lambda p: a * (1 + 0.01 * log2(p))),
        ("drift_linear", lambda a: lambda p: a * (1 + 0.0005 * p)),
        ("drift_inverse", lambda a: lambda p: a * (1 + 0.05 / p)),
        ("drift_sqrt", lambda a: lambda p: a * (1 + 0.004 * math.sqrt(p))),
    ]
    return [(f"near_{name}_{i}", shape(a)) for name, shape in shapes for i, a in enumerate((1.0, 30.0))]


def _additive_2p():
    s = math.sqrt
    shapes = [
        ("p_q", lambda a, b: lambda p, q: a + b * p + 0.01 * b * q),
        ("logp_sqrtq", lambda a, b: lambda p, q: a + b * log2(p) + 0.2 * b * s(q)),
        ("plogp_logq", lambda a, b: lambda p, q: a + 0.1 * b * p * log2(p) + b * log2(q)),
        ("inverse_q", lambda a, b: lambda p, q: a + 100 * b / p + 0.01 * b * q),
    ]
    return [(f"add2_{name}_{i}", shape(a, b)) for name, shape in shapes for i, (a, b) in
            enumerate(((1.0, 0.5), (10.0, 0.2)))]


def make_cases(quick):
    groups = [("weak", _weak()), ("strong", _strong()), ("constant", _constant()),
              ("near-constant", _near_constant()), ("additive-2p", _additive_2p())]
    cases = []
    for family, members in groups:
        for name, function in (members[:2] if quick else members):
            cases.append((family, name, function))
    return cases


def _measure(function, point, reps, noise, rng):
    return [function(*point) * (1.0 + rng.uniform(-noise, noise)) for _ in range(reps)]


def _noise_tag(noise):
    return f"n{round(noise * 1000):03d}"


def write_inputs(cases, directory, seeds, reps, noise_levels):
    """Text files (fit points only): per seed and noise level one file per parameter count, a
    REGION per case (NAME_nNNN_sSEED); returns (paths, held-out truth {(region, p): (family,
    noise, value)})."""
    paths, truth = [], {}
    for seed in range(seeds):
        for noise in noise_levels:
            rng = random.Random(1000 + seed + round(noise * 1e6))
            for two in (False, True):
                members = [c for c in cases if (c[0] == "additive-2p") == two]
                if not members:
                    continue
                if two:
                    fit = [(p, q) for p in FIT_POINTS for q in FIT_Q]
                    lines = ["PARAMETER p", "PARAMETER q",
                             "POINTS " + " ".join(f"( {p} {q} )" for p, q in fit), ""]
                else:
                    fit = [(p,) for p in FIT_POINTS]
                    lines = ["PARAMETER p", "POINTS " + " ".join(map(str, FIT_POINTS)), ""]
                for family, name, function in members:
                    region = f"{name}_{_noise_tag(noise)}_s{seed}"
                    lines += [f"REGION {region}", "METRIC time"]
                    for point in fit:
                        lines.append("DATA " + " ".join(repr(v) for v in _measure(function, point, reps, noise, rng)))
                    lines.append("")
                    for p in HELD_OUT:
                        point = (p, HELD_OUT_Q) if two else (p,)
                        truth[(region, p)] = (family, noise,
                                              statistics.fmean(_measure(function, point, reps, noise, rng)))
                path = os.path.join(directory, f"extrapolation_{'2p' if two else '1p'}_{_noise_tag(noise)}_s{seed}.txt")
                with open(path, "w", encoding="utf-8") as f:
                    f.write("\n".join(lines))
                paths.append(path)
    return paths, truth


def _predict_args(path):
    two = "_2p_" in os.path.basename(path)
    return [f"p={p},q={HELD_OUT_Q}" if two else f"p={p}" for p in HELD_OUT]


def _predictions(document):
    """(region, p) -> predicted value, from a `--json` document."""
    result = {}
    for model in document["models"]:
        for prediction in model.get("predictions", []):
            value = prediction.get("value")
            point = prediction["point"]
            p = float(point["p"] if isinstance(point, dict) else point)
            result[(model["callpath"], int(round(p)))] = None if value is None else float(value)
    return result


def run_trainscope(cli, path, modeler):
    args = [cli, "model", "--json"]
    if modeler:
        args += ["--modeler", modeler]
    for point in _predict_args(path):
        args += ["--predict", point]
    done = subprocess.run(args + [path], capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args + [path])} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return _predictions(json.loads(done.stdout))


def extrap_python(extrap):
    """The python of Extra-P's venv: --extrap may name that python or the extrap script."""
    name = os.path.basename(extrap)
    if name.startswith("python"):
        return extrap
    with open(extrap, "rb") as f:
        first = f.readline().decode(errors="replace").strip()
    if first.startswith("#!") and "python" in first:
        return first[2:].strip().split()[0]
    sibling = os.path.join(os.path.dirname(extrap), "python")
    if os.path.exists(sibling):
        return sibling
    raise SystemExit(f"--extrap {extrap}: cannot tell the python of Extra-P's venv")


def run_extrap(python, paths, tmp, options=()):
    jobs = [{"input": p, "options": list(options), "predict": _predict_args(p)} for p in paths]
    jobs_path = os.path.join(tmp, "jobs.json")
    with open(jobs_path, "w", encoding="utf-8") as f:
        json.dump(jobs, f)
    done = subprocess.run([python, str(REFERENCE), "--batch", jobs_path], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"extrap_reference.py failed:\n{done.stderr[-2000:]}")
    result = {}
    for document in json.loads(done.stdout):
        if "error" in document:
            raise RuntimeError(f"Extra-P: {document['error']}")
        result.update(_predictions(document))
    return result


def _percentile(values, q):
    if not values:
        return math.nan
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summarize(mode_predictions, truth):
    """mode -> family -> {"errors": [...], "by_point": {p: [...]}, "negative": n, "missing": n, "n": n}"""
    summary = {}
    for mode, predictions in mode_predictions.items():
        families = {}
        for (region, p), (family, _noise, actual) in truth.items():
            for key in (family, "all"):
                stats = families.setdefault(key, {"errors": [], "by_point": {}, "negative": 0, "missing": 0,
                                                  "n": 0})
                stats["n"] += 1
                predicted = predictions.get((region, p))
                if predicted is None or math.isnan(predicted):
                    stats["missing"] += 1
                    continue
                if predicted < 0:
                    stats["negative"] += 1
                error = abs(predicted - actual) / abs(actual)
                stats["errors"].append(error)
                stats["by_point"].setdefault(p, []).append(error)
        summary[mode] = families
    return summary


def print_summary(summary, cases, seeds):
    print(f"held-out extrapolation: fit p = {', '.join(map(str, FIT_POINTS))}; predict p = "
          f"{', '.join(map(str, HELD_OUT))}; {len(cases)} functions x {seeds} seed(s)")
    print("relative error |predicted - measured| / measured (median / 90th percentile), negative predictions")
    headers = ["mode", "family", "median", "p90"] + [f"median@{p}" for p in HELD_OUT] + ["negative", "missing"]
    table = [headers]
    for mode, families in summary.items():
        for family in FAMILIES + ("all",):
            stats = families.get(family)
            if stats is None:
                continue
            errors = stats["errors"]
            row = [mode, family, f"{_percentile(errors, 0.5):.1%}", f"{_percentile(errors, 0.9):.1%}"]
            row += [f"{_percentile(stats['by_point'].get(p, []), 0.5):.1%}" for p in HELD_OUT]
            row += [f"{stats['negative']}/{stats['n']}", f"{stats['missing']}/{stats['n']}"]
            table.append(row)
    widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
    for r in table:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))


def family_table(modes, truth, noise_levels):
    """Rows (family, noise, {mode: median error}) over cases x held-out points."""
    rows = []
    for family in FAMILIES:
        for noise in noise_levels:
            keys = [k for k, (f, n, _) in truth.items() if f == family and n == noise]
            if not keys:
                continue
            medians = {}
            for mode, predictions in modes.items():
                errors = [abs(predictions[k] - truth[k][2]) / abs(truth[k][2]) for k in keys
                          if predictions.get(k) is not None and not math.isnan(predictions[k])]
                medians[mode] = _percentile(errors, 0.5)
            rows.append((family, noise, medians))
    return rows


def print_family_table(rows, modes):
    print("median held-out error per family and noise level")
    headers = ["family", "noise"] + list(modes)
    table = [headers]
    for family, noise, medians in rows:
        table.append([family, f"{noise:.0%}"] + [f"{medians[m]:.2%}" for m in modes])
    widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
    for r in table:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainscope", required=True, help="the trainscope CLI binary")
    parser.add_argument("--extrap", help="Extra-P's extrap command or its venv's python (optional)")
    parser.add_argument("--seeds", type=int, default=1, help="noise draws per function")
    parser.add_argument("--noise", default="0.01,0.03,0.15",
                        help="relative half-widths of the noise, comma-separated (default 0.01,0.03,0.15)")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 cases per family, 1 seed (a smoke test)")
    parser.add_argument("--json-out", help="also write the per-prediction results here")
    parser.add_argument("--show-worst", type=int, default=0, metavar="N",
                        help="list the N worst predictions of each mode")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds = 1
    cases = make_cases(args.quick)
    try:
        noise_levels = [float(x) for x in str(args.noise).split(",") if x.strip()]
    except ValueError:
        parser.error(f"--noise {args.noise!r}: comma-separated numbers, e.g. 0.01,0.03")

    with tempfile.TemporaryDirectory(prefix="model-extrapolation-") as tmp:
        paths, truth = write_inputs(cases, tmp, args.seeds, args.repetitions, noise_levels)
        modes = {}
        for label, modeler in (("trainscope --modeler extrap", "extrap"), ("trainscope", None)):
            merged = {}
            for path in paths:
                merged.update(run_trainscope(args.trainscope, path, modeler))
            modes[label] = merged
        if args.extrap:
            python = extrap_python(args.extrap)
            modes["Extra-P 4.2.5"] = run_extrap(python, paths, tmp)
            modes["Extra-P, negative exponents"] = run_extrap(python, paths, tmp,
                                                              ["allow_negative_exponents=True"])

    summary = summarize(modes, truth)
    print_summary(summary, cases, args.seeds)
    print()
    order = [m for m in ("Extra-P 4.2.5", "Extra-P, negative exponents", "trainscope",
                         "trainscope --modeler extrap") if m in modes]
    print_family_table(family_table(modes, truth, noise_levels), order)
    if "Extra-P 4.2.5" in modes:
        ours, theirs = modes["trainscope --modeler extrap"], modes["Extra-P 4.2.5"]
        differences = [abs(ours[k] - v) / max(abs(v), 1e-300) for k, v in theirs.items()
                       if v is not None and ours.get(k) is not None]
        unmatched = sum(1 for k in theirs if ours.get(k) is None)
        print(f"trainscope --modeler extrap vs Extra-P 4.2.5: largest relative difference of a prediction "
              f"{max(differences, default=0.0):.1e} ({len(differences)} compared, {unmatched} unmatched)")
    if args.show_worst:
        for mode, predictions in modes.items():
            scored = []
            for key, (family, _noise, actual) in truth.items():
                predicted = predictions.get(key)
                if predicted is not None:
                    scored.append((abs(predicted - actual) / abs(actual), key, predicted, actual))
            print(f"worst of {mode}:")
            for error, (region, p), predicted, actual in sorted(scored, reverse=True)[:args.show_worst]:
                print(f"  {region} p={p}: predicted {predicted:.4g}, measured {actual:.4g} ({error:.0%})")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump({"truth": {f"{r}@{p}": v[2] for (r, p), v in truth.items()},
                       "predictions": {m: {f"{r}@{p}": v for (r, p), v in preds.items()}
                                       for m, preds in modes.items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
