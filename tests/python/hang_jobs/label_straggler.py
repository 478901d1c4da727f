"""One rank of a two-rank gloo job (start it with diagnosis_jobs/launch2.py) in which rank
1 computes 25 ms longer than rank 0 every step, before the gradient all-reduce where rank 0
waits for it: STRAGGLER(compute, rank 1) by construction. The capture is asked from code:
trainscope.torch.capture_on_anomaly() and .step() at each step's end, so a capture request
of `trainscope run`'s watch is taken by both ranks.
"""

import argparse
import time

import torch
import torch.distributed as dist

import trainscope
import trainscope.torch as tstorch


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=300)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(16, 32)
    tmr = trainscope.Timer()  # joins TRAINSCOPE_RUN_DIR as rank RANK
    capture = tstorch.capture_on_anomaly(steps=3)
    for _ in range(args.steps):
        with tmr.scope(trainscope.TimeType.BATCH):
            with tmr.scope(trainscope.TimeType.FORWARD):
                began = time.perf_counter()
                loss = torch.nn.functional.mse_loss(model(data), data[:, :1])
                time.sleep(max(0.0, began + (0.04 if rank == 1 else 0.015) -
                               time.perf_counter()))
            with tmr.scope(trainscope.TimeType.BACKWARD):
                optimizer.zero_grad()
                loss.backward()
            with tmr.scope(trainscope.TimeType.COMM):  # rank 0 waits here
                for param in model.parameters():
                    dist.all_reduce(param.grad)
                    param.grad /= world
            with tmr.scope("OPTIMIZER"):
                optimizer.step()
        capture.step()
    capture.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
