"""What the efficiency ledger costs (issue 42, docs/ledger.md, "Cost").

    PYTHONPATH=<build>/python python bench/ledger_cost.py [--calls N] [--rounds R] [--run RUN_DIR]

The ledger adds nothing to the step path but the once-per-run FLOP count and the
per-forward work hook (trainscope._work.StepWork.batch: the leading dimension of the
model's first tensor input, and its tokens). Measured here:

1. The hook per training forward, for a float input (samples only), an integer token
   batch (batch x sequence) and one with an attention mask (its sum, kept on the
   device: on the CPU read at once), against an empty call of the same shape, in
   interleaved rounds: the medians of the rounds and the difference in microseconds.
2. The reader (trainscope.ledger: steps and metrics read, the ledger concluded) on
   RUN_DIR when given: the median of R reads, with the run's step count.
"""

import argparse
import statistics
import time

import torch

import trainscope
from trainscope._work import StepWork


def per_call_us(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--run", help="a run directory for the reader's cost")
    args = parser.parse_args()

    module = torch.nn.Linear(4, 4)
    inputs = {
        "float (samples)": ((torch.zeros(32, 4),), {}),
        "tokens (32 x 128)": ((torch.zeros(32, 128, dtype=torch.long),), {}),
        "tokens + mask": ((torch.zeros(32, 128, dtype=torch.long),),
                          {"attention_mask": torch.ones(32, 128, dtype=torch.long)}),
    }

    def empty(torch_, module_, a, kw):  # the call the hook replaces: same arguments
        return None

    print(f"1. the work hook per training forward ({args.calls} calls x {args.rounds} rounds, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads)")
    for name, (a, kw) in inputs.items():
        work = StepWork()
        hook, base = [], []
        for _ in range(args.rounds):
            base.append(per_call_us(lambda: empty(torch, module, a, kw), args.calls))
            hook.append(per_call_us(lambda: work.batch(torch, module, a, kw), args.calls))
            work._samples, work._tokens = 0, 0  # pylint: disable=protected-access
        h, b = statistics.median(hook), statistics.median(base)
        print(f"   {name:20s} hook {h:6.2f} us, empty call {b:5.2f} us: {h - b:6.2f} us a forward")

    if args.run:
        times = []
        ledger = None
        for _ in range(args.rounds):
            start = time.perf_counter()
            ledger = trainscope.ledger(args.run)
            times.append(time.perf_counter() - start)
        print(f"2. the reader (trainscope.ledger) on {args.run}: {ledger['steps']} steps with "
              f"work, {statistics.median(times) * 1e3:.1f} ms (median of {args.rounds})")
        print(f"   {ledger['line']}")


if __name__ == "__main__":
    main()
