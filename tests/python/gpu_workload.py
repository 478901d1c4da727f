"""GPU work of known shape for tests/python/test_gpu_truth.py, run as a program
(alone, under Nsight Compute, or under `trainscope run`). Needs torch with CUDA.

  gpu_workload.py time [--reps N]      prints JSON: per rep, trainscope's and
                                       torch.cuda.Event's times of a spin kernel
                                       (BACKWARD) and a matmul (FORWARD)
  gpu_workload.py kernels [--reps N]   the same kernels, nothing timed (for ncu)
  gpu_workload.py nvtx                 5 add_ kernels outside any region, then
                                       3 mul_ kernels inside a FORWARD region
  gpu_workload.py alloc --gib G --hold S   holds G GiB of device memory S seconds
"""

import argparse
import json
import statistics
import sys
import time

import torch

SPIN_CYCLES = 2_000_000  # about 1 ms at H100 clocks
MATMUL_N = 4096


def _inputs():
    torch.manual_seed(0)
    return torch.randn(MATMUL_N, MATMUL_N, device="cuda")


def _warm_up(x):
    for _ in range(3):
        torch.cuda._sleep(SPIN_CYCLES)  # pylint: disable=protected-access
        x @ x  # cuBLAS handle and kernel selection stay out of the numbers
    torch.cuda.synchronize()


def time_kernels(reps):
    import trainscope.torch as timer  # pylint: disable=import-outside-toplevel

    tmr = timer.CPUGPUTimer(require_gpu=True, warmup=0)
    x = _inputs()
    _warm_up(x)
    result = {"spin": {"trainscope": [], "torch": []}, "matmul": {"trainscope": [], "torch": []}}
    for _ in range(reps):
        for name, key, work in (
            ("spin", timer.TimeType.BACKWARD,
             lambda: torch.cuda._sleep(SPIN_CYCLES)),  # pylint: disable=protected-access
            ("matmul", timer.TimeType.FORWARD, lambda: x @ x),
        ):
            before = torch.cuda.Event(enable_timing=True)
            after = torch.cuda.Event(enable_timing=True)
            before.record()
            tmr.start(key, gpu=True)
            work()
            tmr.end(key, gpu=True)
            after.record()
            after.synchronize()
            result[name]["torch"].append(before.elapsed_time(after) / 1e3)
    result["spin"]["trainscope"] = tmr.get_time(timer.TimeType.BACKWARD, gpu=True)
    result["matmul"]["trainscope"] = tmr.get_time(timer.TimeType.FORWARD, gpu=True)
    # A 10,000-batch loop of small GPU work: how often did the timer wait?
    loop = timer.CPUGPUTimer(require_gpu=True)
    y = torch.randn(256, 256, device="cuda")
    for _ in range(10_000):
        loop.start(timer.TimeType.BATCH, gpu=True)
        y = torch.tanh(y @ y)
        loop.end(timer.TimeType.BATCH, gpu=True)
    result["loop"] = {"blocking_waits": loop.blocking_waits(), "outstanding": loop.outstanding(),
                      "events_created": loop.events_created()}
    stats = loop.get_time_stats(timer.TimeType.BATCH, gpu=True)
    result["loop"]["gpu_regions"] = stats.count + stats.warmup_excluded
    for name in ("spin", "matmul"):
        for who in ("trainscope", "torch"):
            result[name][who + "_median"] = statistics.median(result[name][who])
    json.dump(result, sys.stdout)


def kernels(reps):
    x = _inputs()
    _warm_up(x)
    for _ in range(reps):
        torch.cuda._sleep(SPIN_CYCLES)  # pylint: disable=protected-access
        x @ x
    torch.cuda.synchronize()


def nvtx():
    import trainscope  # pylint: disable=import-outside-toplevel

    tmr = trainscope.Timer(warmup=0)
    x = torch.ones(1 << 20, device="cuda")
    for _ in range(5):
        x.add_(1)
    torch.cuda.synchronize()
    tmr.start(trainscope.TimeType.FORWARD)
    for _ in range(3):
        x.mul_(2)
    torch.cuda.synchronize()
    tmr.end(trainscope.TimeType.FORWARD)
    for _ in range(5):
        x.add_(1)
    torch.cuda.synchronize()


def alloc(gib, hold):
    block = torch.empty(int(gib * (1 << 30)), dtype=torch.uint8, device="cuda")
    block.fill_(1)
    torch.cuda.synchronize()
    print(f"holding {block.numel() / (1 << 30):.1f} GiB", flush=True)
    time.sleep(hold)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["time", "kernels", "nvtx", "alloc"])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--gib", type=float, default=4)
    parser.add_argument("--hold", type=float, default=3)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_workload: torch sees no CUDA device")
    if args.mode == "time":
        time_kernels(args.reps)
    elif args.mode == "kernels":
        kernels(args.reps)
    elif args.mode == "nvtx":
        nvtx()
    else:
        alloc(args.gib, args.hold)


if __name__ == "__main__":
    main()
