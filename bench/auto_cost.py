"""What zero-code instrumentation costs (issue 23, docs/auto.md, "Cost").

    PYTHONPATH=<build>/python python bench/auto_cost.py [--rounds R] [--steps S]

1. Per step: a training step of a tiny model (where the step is almost all
   Python and wrapper overhead) with and without trainscope.torch.instrument()
   (every patch: fetch, forward, backward, optimizer), in interleaved rounds; the
   difference is the instrumentation's cost per step in microseconds, reported
   also as a share of a real small CPU training step measured in the same run
   (an MLP sized so that a step takes about 5 ms here). Goal: <= 1%.
2. Per module with layers: the same tiny model with N nested modules, with
   instrument(layers=depth) against instrument(): the cost per module per step
   (forward regions every step, backward regions on one step in K: the
   default, TRAINSCOPE_LAYER_BACKWARD_EVERY or --backward-every; amortized
   over the steps), and the same with backward on every step (K = 1).
   Goal: <= 2 us.
3. Interpreter start with the --auto bootstrap installed but off (its directory
   first on PYTHONPATH, TRAINSCOPE_AUTO unset), and on without torch imported,
   against a plain start: `python -c pass`, interleaved, medians and the
   difference with a bootstrap 95% interval, bytecode cached as after a
   command's first Python process. Goal: not measurable when off.

Each figure is a ratio or a difference against a baseline measured in the same
run, in interleaved rounds (the machine's load changes over time). --clock cpu
times steps by the process's CPU time (every thread, the export thread's too)
rather than the wall clock: on a machine shared with other work, the wall clock
also measures the scheduler.
"""

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from torch import nn

import trainscope
import trainscope.torch as ts_torch
from trainscope import _torch_auto

HERE = os.path.dirname(os.path.abspath(__file__))
BOOTSTRAP = os.path.join(HERE, "..", "src", "launch", "auto_sitecustomize.py")
HOOKS = os.path.join(HERE, "..", "src", "launch", "auto_hooks.py")
# The bootstrap's hooks file is the one import hook, then auto_hooks.py
# (cmake/TrainscopeEmbeddedTexts.cmake).
IMPORT_HOOK = os.path.join(HERE, "..", "bindings", "python", "trainscope", "_import_hook.py")


def make_step(width, depth, batch):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(width, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    data = [(torch.randn(batch, width), torch.randint(0, 4, (batch,))) for _ in range(8)]
    loader = torch.utils.data.DataLoader(data, batch_size=None)
    loss_fn = nn.CrossEntropyLoss()

    def epoch():
        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        return len(data)

    return epoch


# What a step is timed with: the wall clock, or the process's CPU time (all its
# threads: the export thread's work on the regions too), which a machine shared
# with other work inflates far less than the wall clock (--clock).
CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCK["wall"]


def seconds_per_step(epoch, steps):
    done, start = 0, clock()
    while done < steps:
        done += epoch()
    return (clock() - start) / done


def interleaved(variants, rounds, steps):
    """variant name -> list of seconds per step, one per round, in random order per round."""
    out = {name: [] for name in variants}
    for _ in range(rounds):
        order = list(variants.items())
        random.shuffle(order)
        for name, (epoch, setup) in order:
            handle = setup()
            try:
                out[name].append(seconds_per_step(epoch, steps))
            finally:
                if handle is not None:
                    handle.remove()
    return out


def interval(a, b, reps=2000):
    """Median of b - median of a, with a bootstrap 95% interval."""
    diffs = []
    for _ in range(reps):
        ra = [random.choice(a) for _ in a]
        rb = [random.choice(b) for _ in b]
        diffs.append(statistics.median(rb) - statistics.median(ra))
    diffs.sort()
    return (statistics.median(b) - statistics.median(a), diffs[int(0.025 * reps)],
            diffs[int(0.975 * reps)])


def start_times(rounds):
    tmp = tempfile.mkdtemp(prefix="auto-cost-")
    shutil.copy(BOOTSTRAP, os.path.join(tmp, "sitecustomize.py"))
    with open(os.path.join(tmp, "_trainscope_auto_hooks.py"), "w", encoding="utf-8") as out:
        for part in (IMPORT_HOOK, HOOKS):
            with open(part, encoding="utf-8") as text:
                out.write(text.read() + "\n")
    # As a user's processes: bytecode cached beside the bootstrap after the first start.
    base = {k: v for k, v in os.environ.items()
            if k not in ("TRAINSCOPE_AUTO", "PYTHONDONTWRITEBYTECODE")}
    path = os.environ.get("PYTHONPATH", "")
    variants = {
        "plain": base,
        "bootstrap, off": dict(base, PYTHONPATH=f"{tmp}:{path}"),
        "bootstrap, on (no torch)": dict(base, PYTHONPATH=f"{tmp}:{path}", TRAINSCOPE_AUTO="1"),
    }
    out = {name: [] for name in variants}
    for env in variants.values():  # the first start compiles the bootstrap
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    for _ in range(rounds):
        order = list(variants.items())
        random.shuffle(order)
        for name, env in order:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
            out[name].append(time.perf_counter() - start)
    shutil.rmtree(tmp)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--start-rounds", type=int, default=40)
    parser.add_argument("--backward-every", type=int, default=None,
                        help="K: layer backward on one step in K (default: the "
                             "environment's TRAINSCOPE_LAYER_BACKWARD_EVERY, else trainscope's)")
    parser.add_argument("--clock", choices=sorted(CLOCK), default="wall",
                        help="time steps by the wall clock or by the process's CPU time (all "
                             "threads), which other load on the machine inflates less")
    args = parser.parse_args()
    global clock  # pylint: disable=global-statement
    clock = CLOCK[args.clock]
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="auto-cost-runs-")
    with trainscope.start_run(root=tmp, run_name="auto-cost"):
        tiny = make_step(width=8, depth=1, batch=4)
        real = make_step(width=128, depth=3, batch=64)  # about 5 ms a step here
        results = interleaved({"tiny": (tiny, lambda: None),
                               "tiny, instrumented": (tiny, ts_torch.instrument),
                               "real": (real, lambda: None)}, args.rounds, args.steps)
        deep = make_step(width=8, depth=8, batch=4)  # 17 modules below the root
        modules = 17
        every = args.backward_every
        layered = interleaved({"deep, instrumented": (deep, ts_torch.instrument),
                               "deep, layers": (deep, lambda: ts_torch.instrument(
                                   layers=1, layer_backward_every=every)),
                               "deep, layers, backward every step": (
                                   deep, lambda: ts_torch.instrument(
                                       layers=1, layer_backward_every=1))},
                              args.rounds, args.steps)
        sampled = _torch_auto._layer_backward_every(every)  # pylint: disable=protected-access
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, {args.rounds} interleaved rounds of "
          f"{args.steps} steps, {args.clock} clock")
    real_step = statistics.median(results["real"])
    cost, low, high = interval(results["tiny"], results["tiny, instrumented"])
    print(f"tiny step {statistics.median(results['tiny']) * 1e6:8.1f} us bare, "
          f"{statistics.median(results['tiny, instrumented']) * 1e6:8.1f} us instrumented")
    print(f"instrumentation per step: {cost * 1e6:.1f} us [{low * 1e6:.1f}, {high * 1e6:.1f}]; "
          f"real small step {real_step * 1e3:.2f} ms: {100 * cost / real_step:.2f}% "
          f"[{100 * low / real_step:.2f}, {100 * high / real_step:.2f}] (goal <= 1% of a 5 ms step: "
          f"{'met' if 100 * high / 5e-3 <= 1 else 'MISSED'})")
    per_module, low, high = interval(layered["deep, instrumented"], layered["deep, layers"])
    print(f"layers (backward on one step in {sampled}): {per_module / modules * 1e6:.1f} us per "
          f"module per step [{low / modules * 1e6:.1f}, {high / modules * 1e6:.1f}] ({modules} "
          f"modules; goal <= 2 us: {'met' if per_module / modules <= 2e-6 else 'MISSED'})")
    # The best round of each (what other load on the machine added least to).
    best = min(layered["deep, layers"]) - min(layered["deep, instrumented"])
    print(f"  best round of each: {best / modules * 1e6:.1f} us per module per step")
    every_step, low, high = interval(layered["deep, instrumented"],
                                     layered["deep, layers, backward every step"])
    print(f"  backward on every step: {every_step / modules * 1e6:.1f} us per module per step "
          f"[{low / modules * 1e6:.1f}, {high / modules * 1e6:.1f}]")
    starts = start_times(args.start_rounds)
    plain = starts["plain"]
    print(f"interpreter start, plain: {statistics.median(plain) * 1e3:.1f} ms")
    for name in ("bootstrap, off", "bootstrap, on (no torch)"):
        diff, low, high = interval(plain, starts[name])
        print(f"  {name}: {diff * 1e3:+.2f} ms [{low * 1e3:+.2f}, {high * 1e3:+.2f}]"
              + ("  (not measurable: the interval holds 0)" if low <= 0 <= high else ""))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
