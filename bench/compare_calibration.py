"""Calibration of `trainscope compare` on real PyTorch jobs (issue 24, docs/compare.md).

    PYTHONPATH=<build>/python TRAINSCOPE_CLI=<build>/tools/trainscope \\
        python bench/compare_calibration.py [--steps 400] [--pairs 20] [--out FILE.json]

A real small PyTorch training (an MLP on random data through a DataLoader, one
thread) runs under `trainscope run`, timing each step as BATCH; a slowdown is
injected into B by spinning (not sleeping: a spin lasts what it is asked) for a
share of the baseline's median step, measured first. Runs of all pools are
interleaved so that a change in the machine's load hits every pool alike.

1. A/A: `pairs` pairs of identical runs -> verdicts other than same/inconclusive
   (false alarms; goal <= 1 in 20). google/benchmark's U test (Mann-Whitney,
   two-sided, alpha 0.05, over all steps, as tools/compare.py on repetitions) on
   the same pairs, for comparison.
2. Power, single runs: 10% (goal: slower 20 of 20), 5%, 3%, 2%; the smallest
   slowdown called slower 18 times in 20; how often the interval covers the
   injected ratio (goal 18 of 20).
3. Power, three runs per side (the run as the unit): 3% (goal: 18 of 20).
4. A run with a 2-second stall in its middle against one without: the verdict
   is same (or inconclusive), and the stall is named in the note.

Each comparison goes through the command a user runs (`trainscope compare A B
--json`). Figures go to stdout and, with --out, to a JSON file.

--held-out (issue 41): new A/A pairs, none of those the run-to-run term was fitted on,
made at different times (every pair and detection of the calibration in one shuffled
order, so none of a kind back to back), each rate with its 95% (Wilson) interval:
  a. quiet: A/A pairs -> false verdicts (slower/faster);
  b. burner: A/A pairs with a two-core CPU burner on for B only -> false verdicts, and
     how many are `inconclusive (contention)`;
  c. detection: `trainscope compare --run A --run B --repeat 5` with B 5% slower (a spin),
     quiet and with the burner on throughout -> called slower;
  d. with --run-aa N: N A/A comparisons with `--run ... --repeat 5`, quiet and loaded.
Linux autogroup is switched off while it runs (root only; NoAutogroup says why).
    python bench/compare_calibration.py --held-out --pairs 60 --detect 20 --keep DIR
prints the markdown table of docs/compare-statistics.md.
"""

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine_load import Burner, NoAutogroup  # noqa: E402

JOB = r'''
import sys, time
import torch
import trainscope

steps, spin_s, stall_at, stall_s = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64),
                            torch.nn.ReLU(), torch.nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.TensorDataset(torch.randn(4096, 64), torch.randint(0, 10, (4096,)))
loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True, num_workers=0)
timer = trainscope.Timer()
done = 0
while done < steps:
    for x, y in loader:
        timer.start("BATCH")
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if spin_s > 0:
            end = time.perf_counter() + spin_s
            while time.perf_counter() < end:
                pass
        if done == stall_at:
            time.sleep(stall_s)
        timer.end("BATCH")
        done += 1
        if done == steps:
            break
'''


def run_job(cli, python, job, directory, steps, spin_s=0.0, stall_at=-1, stall_s=0.0):
    if os.path.exists(os.path.join(directory, "run.json")):
        return directory  # --keep DIR of an earlier calibration: its runs again
    done = subprocess.run([cli, "run", "--run-dir", directory, "--", python, job, str(steps),
                           repr(spin_s), str(stall_at), repr(stall_s)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"job failed ({done.returncode}): {done.stderr[-2000:]}")
    return directory


def steps_of(directory):
    values = []
    with open(os.path.join(directory, "regions-0.csv"), encoding="utf-8") as f:
        next(f)
        for line in f:
            parts = line.split(",")
            if parts[0] == "BATCH" and parts[1] == "CPU":
                values.append(int(parts[5]) * 1e-9)
    return values


RUN_NOISE = []


def compare(cli, a, b):
    done = subprocess.run([cli, "compare", a, b, "--json", "--key", "BATCH"] + RUN_NOISE,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"compare failed ({done.returncode}): {done.stderr}")
    return json.loads(done.stdout)["pairs"][0]["overall"]


def u_test_p(x, y):
    """Two-sided Mann-Whitney U test, normal approximation with tie and continuity
    correction (scipy.stats.mannwhitneyu's asymptotic method, which google/benchmark's
    tools/compare.py calls)."""
    n1, n2 = len(x), len(y)
    pooled = sorted([(v, 0) for v in x] + [(v, 1) for v in y])
    ranks = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[k] = rank
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    r1 = sum(r for r, (_, side) in zip(ranks, pooled) if side == 0)
    u1 = r1 - n1 * (n1 + 1) / 2
    mu = n1 * n2 / 2
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    if sigma == 0:
        return 1.0
    z = (abs(u1 - mu) - 0.5) / sigma
    return min(1.0, math.erfc(z / math.sqrt(2)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--out")
    parser.add_argument("--keep", help="keep the runs in this folder (its runs are reused when "
                        "it holds an earlier calibration's: the comparisons again, no new runs)")
    parser.add_argument("--run-noise", type=float, default=None,
                        help="trainscope compare --run-noise PCT (default: compare's)")
    args = parser.parse_args()
    cli = os.environ.get("TRAINSCOPE_CLI")
    if not cli:
        sys.exit("set TRAINSCOPE_CLI to the trainscope binary")
    python = sys.executable
    if args.run_noise is not None:
        RUN_NOISE.extend(["--run-noise", str(args.run_noise)])
    root = args.keep or tempfile.mkdtemp(prefix="compare-calibration-")
    os.makedirs(root, exist_ok=True)
    job = os.path.join(root, "job.py")
    with open(job, "w", encoding="utf-8") as f:
        f.write(JOB)
    started = time.time()

    # The baseline's median step: the spin of a slowdown is a share of it.
    probe = run_job(cli, python, job, os.path.join(root, "probe"), args.steps)
    base = statistics.median(steps_of(probe)[args.steps // 4:])
    print(f"baseline median step: {base * 1e3:.3f} ms ({args.steps} steps a run)", flush=True)

    n = args.pairs
    pools = {"a": (0.0, 3 * n), "s10": (0.10, n), "s5": (0.05, n), "s3": (0.03, 3 * n),
             "s2": (0.02, n)}
    runs = {name: [] for name in pools}
    order = []
    for i in range(max(count for _, count in pools.values())):
        for name, (_, count) in pools.items():
            if i < count:
                order.append((name, i))
    for k, (name, i) in enumerate(order):
        share = pools[name][0]
        directory = os.path.join(root, name, f"r{i:02d}")
        run_job(cli, python, job, directory, args.steps, spin_s=share * base)
        runs[name].append(directory)
        if (k + 1) % 20 == 0:
            print(f"  {k + 1}/{len(order)} runs ({time.time() - started:.0f} s)", flush=True)

    results = {"steps": args.steps, "pairs": n, "baseline_step_ms": base * 1e3}

    # 1. A/A.
    aa = [compare(cli, runs["a"][2 * i], runs["a"][2 * i + 1]) for i in range(n)]
    alarms = [c["verdict"] for c in aa if c["verdict"] not in ("same", "inconclusive")]
    u_alarms = sum(u_test_p(steps_of(runs["a"][2 * i]), steps_of(runs["a"][2 * i + 1])) < 0.05
                   for i in range(n))
    results["aa"] = {"verdicts": {v: sum(c["verdict"] == v for c in aa)
                                  for v in ("same", "inconclusive", "slower", "faster")},
                     "false_alarms": len(alarms), "u_test_false_alarms": u_alarms,
                     "ratios": [c["ratio"] for c in aa]}
    print(f"A/A: {results['aa']['verdicts']}; false alarms {len(alarms)}/{n}; "
          f"google/benchmark U test (alpha 0.05): {u_alarms}/{n}", flush=True)

    # 2. Power, single runs.
    results["single"] = {}
    for name in ("s10", "s5", "s3", "s2"):
        share = pools[name][0]
        cs = [compare(cli, runs["a"][2 * n + i], runs[name][i]) for i in range(n)]
        slower = sum(c["verdict"] == "slower" for c in cs)
        covered = sum(c["low"] is not None and c["low"] <= 1 + share <= c["high"] for c in cs)
        u = sum(u_test_p(steps_of(runs["a"][2 * n + i]), steps_of(runs[name][i])) < 0.05
                for i in range(n))
        results["single"][name] = {"slowdown": share, "slower": slower, "covered": covered,
                                   "u_test_significant": u,
                                   "median_ratio": statistics.median(c["ratio"] for c in cs)}
        print(f"single runs, {share:.0%} slower: called slower {slower}/{n}, interval covers "
              f"{1 + share:.2f} {covered}/{n}, median ratio "
              f"{results['single'][name]['median_ratio']:.4f}; U test significant {u}/{n}",
              flush=True)
    detected = [pools[k][0] for k in ("s2", "s3", "s5", "s10")
                if results["single"][k]["slower"] >= math.ceil(0.9 * n)]
    results["smallest_detected_18_of_20"] = min(detected) if detected else None
    print(f"smallest slowdown single runs call slower >= 90% of the time: "
          f"{results['smallest_detected_18_of_20']}", flush=True)

    # 3. Three runs per side at 3%.
    three = []
    for i in range(n):
        side_a = os.path.join(root, "three", f"a{i:02d}")
        side_b = os.path.join(root, "three", f"b{i:02d}")
        for side, pool in ((side_a, "a"), (side_b, "s3")):
            os.makedirs(side, exist_ok=True)
            for j in range(3):
                src = runs[pool][(3 * i + j) % len(runs[pool])]
                link = os.path.join(side, f"r{j}")
                if not os.path.exists(link):
                    os.symlink(os.path.abspath(src), link)
        three.append(compare(cli, side_a, side_b))
    slower3 = sum(c["verdict"] == "slower" for c in three)
    covered3 = sum(c["low"] is not None and c["low"] <= 1.03 <= c["high"] for c in three)
    results["three_runs_3pct"] = {"slower": slower3, "covered": covered3,
                                  "verdicts": {v: sum(c["verdict"] == v for c in three)
                                               for v in ("same", "inconclusive", "slower",
                                                         "faster")}}
    print(f"three runs a side, 3% slower: called slower {slower3}/{n}, interval covers 1.03 "
          f"{covered3}/{n}; {results['three_runs_3pct']['verdicts']}", flush=True)

    # 4. A 2-second stall in the middle, against a run made just before it (the
    # same machine state) and against each of the single-run A pool.
    reference = run_job(cli, python, job, os.path.join(root, "stall-reference"), args.steps)
    stalled = run_job(cli, python, job, os.path.join(root, "stall"), args.steps,
                      stall_at=args.steps // 2, stall_s=2.0)
    done = subprocess.run([cli, "compare", reference, stalled] + RUN_NOISE, capture_output=True,
                          text=True)
    overall = compare(cli, reference, stalled)
    against_pool = [compare(cli, runs["a"][2 * n + i], stalled)["verdict"] for i in range(n)]
    named = "stall" in overall["note"]
    results["stall"] = {"verdict": overall["verdict"], "note": overall["note"],
                        "max_b": overall["max_b"], "p99_b": overall["p99_b"],
                        "against_pool": {v: against_pool.count(v)
                                         for v in ("same", "inconclusive", "slower", "faster")}}
    print(f"2-s stall: verdict {overall['verdict']} against the run before it; against each of "
          f"{n} other A runs: {results['stall']['against_pool']}; named: {named}: "
          f"{overall['note']}", flush=True)
    print(done.stdout)
    results["seconds"] = time.time() - started
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    print(f"done in {results['seconds']:.0f} s; runs in {root}")


def wilson(k, n):
    """The 95% Wilson interval of k successes in n, as percentages."""
    if n == 0:
        return float("nan"), float("nan")
    z = 1.959964
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return 100 * max(0.0, centre - half), 100 * min(1.0, centre + half)


def held_out_schedule(pairs, detect, seed, run_aa=0):
    """Every A/A pair (quiet and burner) and every detection in one shuffled
    order, so no two of a kind are made back to back and each kind is spread
    over the whole calibration (the machine's state at different times); within
    a pair, which side runs first is drawn too."""
    rng = random.Random(seed)
    items = ([("quiet", i, rng.random() < 0.5) for i in range(pairs)] +
             [("burner", i, rng.random() < 0.5) for i in range(pairs)] +
             [("detect-loaded", i, False) for i in range(detect)] +
             [("detect-quiet", i, False) for i in range(detect)] +
             [("run-aa-loaded", i, False) for i in range(run_aa)] +
             [("run-aa-quiet", i, False) for i in range(run_aa)])
    rng.shuffle(items)
    return items


def detection(cli, python, job, root, steps, spin, kind, i, burn):
    """`trainscope compare --run A --run B --repeat 5` with B `spin` s slower a
    step; its JSON is kept beside its runs (a rerun of the calibration reads it)."""
    folder = os.path.join(root, kind, f"{i:02d}")
    saved = os.path.join(folder, "verdict.json")
    if os.path.exists(saved):
        with open(saved, encoding="utf-8") as f:
            return json.load(f)
    cmd = f"{python} {job} {steps}"
    line = [cli, "compare", "--run", f"{cmd} 0.0 -1 0.0", "--run", f"{cmd} {spin!r} -1 0.0",
            "--repeat", "5", "--root", folder, "--json", "--key", "BATCH"]
    if burn:
        with Burner(2, python):
            done = subprocess.run(line, capture_output=True, text=True, timeout=3600)
    else:
        done = subprocess.run(line, capture_output=True, text=True, timeout=3600)
    if done.returncode not in (0, 1):
        sys.exit(f"compare --run failed ({done.returncode}): {done.stderr[-2000:]}")
    pair = json.loads(done.stdout)["pairs"][0]
    with open(saved, "w", encoding="utf-8") as f:
        json.dump(pair, f)
    return pair


def held_out(args, cli, python, job, root):
    results = {"pairs": args.pairs, "detect": args.detect, "steps": args.steps,
               "load_start": os.getloadavg()}
    started = time.time()
    with NoAutogroup() as autogroup:
        results["autogroup"] = autogroup.state
        print(f"scheduler: {autogroup.state}", flush=True)
        base = run_job(cli, python, job, os.path.join(root, "base"), args.steps)
        spin = 0.05 * statistics.median(steps_of(base))
        schedule = held_out_schedule(args.pairs, args.detect, args.seed, args.run_aa)
        for k, (kind, i, b_first) in enumerate(schedule):
            if kind.startswith("detect") or kind.startswith("run-aa"):
                detection(cli, python, job, root, args.steps, spin if kind.startswith("detect")
                          else 0.0, kind, i, kind.endswith("loaded"))
            else:
                sides = ("b", "a") if b_first else ("a", "b")
                for side in sides:
                    directory = os.path.join(root, kind, f"{i:02d}-{side}")
                    if kind == "burner" and side == "b":
                        with Burner(2, python):
                            run_job(cli, python, job, directory, args.steps)
                    else:
                        run_job(cli, python, job, directory, args.steps)
            if (k + 1) % 10 == 0:
                print(f"  {k + 1}/{len(schedule)} ({time.time() - started:.0f} s, load "
                      f"{os.getloadavg()[0]:.1f})", flush=True)
    results["load_end"] = os.getloadavg()
    rows = []
    for kind in ("quiet", "burner"):
        if args.pairs == 0:
            continue
        verdicts = [compare(cli, os.path.join(root, kind, f"{i:02d}-a"),
                            os.path.join(root, kind, f"{i:02d}-b"))["verdict"]
                    for i in range(args.pairs)]
        false = sum(v in ("slower", "faster") for v in verdicts)
        contention = verdicts.count("inconclusive (contention)")
        low, high = wilson(false, args.pairs)
        name = "quiet" if kind == "quiet" else "two-core burner on B"
        rows.append((f"A/A, {name}: called slower or faster", false, args.pairs, low, high,
                     f"same {verdicts.count('same')}, inconclusive "
                     f"{verdicts.count('inconclusive')}, inconclusive (contention) {contention}"))
        results[kind] = verdicts
    for kind, name in (("detect-quiet", "quiet"), ("detect-loaded", "two-core burner on")):
        if args.detect == 0:
            continue
        pairs = [detection(cli, python, job, root, args.steps, spin, kind, i, False)
                 for i in range(args.detect)]
        verdicts = [p["overall"]["verdict"] for p in pairs]
        runs = [len(p["runs_a"]) + len(p["runs_b"]) for p in pairs]
        detected = verdicts.count("slower")
        low, high = wilson(detected, args.detect)
        rows.append((f"5% slower, `--run ... --repeat 5`, {name}: called slower", detected,
                     args.detect, low, high,
                     f"{statistics.mean(runs) / 2:.1f} runs a side on average; others: "
                     + ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts))
                                 if v != "slower")))
        results[kind] = verdicts
    for kind, name in (("run-aa-quiet", "quiet"), ("run-aa-loaded", "two-core burner on")):
        if args.run_aa == 0:
            continue
        pairs = [detection(cli, python, job, root, args.steps, 0.0, kind, i, False)
                 for i in range(args.run_aa)]
        verdicts = [p["overall"]["verdict"] for p in pairs]
        false = sum(v in ("slower", "faster") for v in verdicts)
        low, high = wilson(false, args.run_aa)
        rows.append((f"A/A, `--run ... --repeat 5`, {name}: called slower or faster", false,
                     args.run_aa, low, high,
                     ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts)))))
        results[kind] = verdicts
    print("| measure | count | rate | 95% interval | |")
    print("| --- | --- | --- | --- | --- |")
    for what, k, n, lo, hi, extra in rows:
        rate = 100 * k / n if n else float("nan")
        print(f"| {what} | {k} / {n} | {rate:.0f}% | [{lo:.0f}%, {hi:.0f}%] | {extra} |")
    results["rows"] = rows
    return results


if __name__ == "__main__":
    if "--held-out" in sys.argv:
        parser = argparse.ArgumentParser(description="held-out calibration (issue 41)")
        parser.add_argument("--held-out", action="store_true")
        parser.add_argument("--steps", type=int, default=300)
        parser.add_argument("--pairs", type=int, default=60)
        parser.add_argument("--detect", type=int, default=20)
        parser.add_argument("--seed", type=int, default=41)
        parser.add_argument("--run-aa", type=int, default=0,
                            help="also this many A/A comparisons with `compare --run --repeat "
                            "5` (identical commands), quiet and with the burner on throughout")
        parser.add_argument("--keep", help="keep the runs in this folder; an interrupted or "
                            "earlier calibration there goes on from its runs (the comparisons "
                            "are made again)")
        parser.add_argument("--out")
        held = parser.parse_args()
        cli_path = os.environ.get("TRAINSCOPE_CLI", "trainscope")
        held_root = held.keep or tempfile.mkdtemp(prefix="compare-held-out-")
        os.makedirs(held_root, exist_ok=True)
        job_path = os.path.join(held_root, "job.py")
        with open(job_path, "w", encoding="utf-8") as f:
            f.write(JOB)
        started = time.time()
        out = held_out(held, cli_path, sys.executable, job_path, held_root)
        out["seconds"] = time.time() - started
        if held.out:
            with open(held.out, "w", encoding="utf-8") as f:
                json.dump(out, f, indent=1)
        print(f"done in {out['seconds']:.0f} s; runs in {held_root}")
    else:
        main()
