"""A loop of 80 steps of 20 ms (a sleep and a matrix product, each step inside
record_function("step I")), step --slow-step 20 times slower (400 ms; -1: none), with
trainscope.torch.capture_on_anomaly() told of each step's end. Prints the captures
written, as JSON, on its last line.
"""

import argparse
import json
import time

import torch

import trainscope
import trainscope.torch as ttorch


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--root", required=True)
    p.add_argument("--slow-step", type=int, default=40)
    args = p.parse_args()
    torch.set_num_threads(1)
    trainscope.start_run(root=args.root)
    capture = ttorch.capture_on_anomaly()
    x = torch.randn(64, 64)
    for i in range(80):
        with torch.autograd.profiler.record_function(f"step {i}"):
            time.sleep(0.4 if i == args.slow_step else 0.02)
            x = torch.tanh(x @ x)
        capture.step()
    capture.close()
    trainscope.end_run()
    print(json.dumps(capture.captures))


if __name__ == "__main__":
    main()
