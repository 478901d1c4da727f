"""GPU work of known shape for tests/python/test_gpu_truth.py, run as a program
(alone, under Nsight Compute, or under `trainscope run`). Needs torch with CUDA.

  gpu_workload.py time [--reps N]      prints JSON: per rep, trainscope's and
                                       torch.cuda.Event's times of a spin kernel
                                       (BACKWARD) and a matmul (FORWARD)
  gpu_workload.py kernels [--reps N]   the same kernels, nothing timed (for ncu)
  gpu_workload.py nvtx                 5 add_ kernels outside any region, then
                                       3 mul_ kernels inside a FORWARD region
  gpu_workload.py alloc --gib G --hold S   holds G GiB of device memory S seconds
  gpu_workload.py steps [--steps N] [--gpu-ms G | --spin-cycles C] [--host-ms H]
                        [--keep-mib K]
                                       a training loop of known shape: per BATCH, a
                                       FORWARD timed on the GPU (a spin kernel of G ms,
                                       or of C cycles; the host waits for it), then H ms
                                       of host-only work (OPTIMIZER, CPU-timed, the GPU
                                       idle), keeping K MiB of new device memory per
                                       step; prints JSON: the spin's cycles per ms and
                                       the GPU's share of the step by torch.cuda.Event;
                                       --cpu: the same loop with waits on the host
                                       (the job's own check, no GPU needed)
  gpu_workload.py union --root DIR [--steps N] [--host-ms H]
                                       a run under DIR whose steps hold GPU regions
                                       that overlap and leave gaps: per BATCH a
                                       FORWARD (spins of 2 ms, with a LOSS of 1 ms
                                       nested inside it), H ms of host work (the GPU
                                       idle), a BACKWARD (a spin of 2 ms); prints
                                       JSON: the run directory
"""

import argparse
import json
import statistics
import sys
import time

import torch

SPIN_CYCLES = 2_000_000  # about 1 ms at H100 clocks
# Queued ahead of each timed rep: the GPU is busy when the region's start event
# is recorded, so the markers and the work run back to back, as in a training
# whose host runs ahead. On an idle GPU a region's GPU time also holds the
# host's launch latency after start() (about 10 us from Python on an H100;
# "spin_idle" below measures it).
PRIMER_CYCLES = 500_000
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
    result = {"spin": {"trainscope": [], "torch": []}, "matmul": {"trainscope": [], "torch": []},
              "spin_idle": {"trainscope": [], "torch": []}}
    for _ in range(reps):
        for name, key, work in (
            ("spin", timer.TimeType.BACKWARD,
             lambda: torch.cuda._sleep(SPIN_CYCLES)),  # pylint: disable=protected-access
            ("matmul", timer.TimeType.FORWARD, lambda: x @ x),
            ("spin_idle", "SPIN_IDLE",
             lambda: torch.cuda._sleep(SPIN_CYCLES)),  # pylint: disable=protected-access
        ):
            if name != "spin_idle":
                torch.cuda._sleep(PRIMER_CYCLES)  # pylint: disable=protected-access
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
    result["spin_idle"]["trainscope"] = tmr.get_time("SPIN_IDLE", gpu=True)
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
    for name in ("spin", "matmul", "spin_idle"):
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


def cycles_per_ms():
    """The spin kernel's cycles per ms on this GPU now (median of 10, after warm-up)."""
    cycles = 1_000_000
    for _ in range(3):
        torch.cuda._sleep(cycles)  # pylint: disable=protected-access
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        before = torch.cuda.Event(enable_timing=True)
        after = torch.cuda.Event(enable_timing=True)
        before.record()
        torch.cuda._sleep(cycles)  # pylint: disable=protected-access
        after.record()
        after.synchronize()
        times.append(before.elapsed_time(after))
    return cycles / statistics.median(times)


def steps(args):
    """See the module's docstring. --cpu: the same loop with the "GPU work" a wait on
    the host and a CPU-only Timer, to check the job itself without a GPU."""
    if args.cpu:
        import trainscope as timer  # pylint: disable=import-outside-toplevel
        per_ms, spin = None, 0
        tmr = timer.Timer()
    else:
        import trainscope.torch as timer  # pylint: disable=import-outside-toplevel
        per_ms = cycles_per_ms()
        spin = args.spin_cycles or int(args.gpu_ms * per_ms)
        tmr = timer.CPUGPUTimer(require_gpu=True)
    kept = []  # --keep-mib: the device memory a careless loop keeps (losses without .item())
    gpu_ms, step_ms = [], []
    for _ in range(args.steps):
        began = time.perf_counter()
        with tmr.scope(timer.TimeType.BATCH):
            if args.cpu:
                with tmr.scope(timer.TimeType.FORWARD):
                    time.sleep(args.gpu_ms / 1e3)  # a wait, as for a GPU: steady under load
                gpu_ms.append(args.gpu_ms)
            else:
                with tmr.scope(timer.TimeType.FORWARD, gpu=True):
                    before = torch.cuda.Event(enable_timing=True)
                    after = torch.cuda.Event(enable_timing=True)
                    before.record()
                    torch.cuda._sleep(spin)  # pylint: disable=protected-access
                    after.record()
                    if args.keep_mib:
                        kept.append(torch.empty(int(args.keep_mib * (1 << 20)),
                                                dtype=torch.uint8, device="cuda"))
                    after.synchronize()
                gpu_ms.append(before.elapsed_time(after))
            with tmr.scope("OPTIMIZER"):  # host work: the GPU idles
                time.sleep(args.host_ms / 1e3)
        step_ms.append((time.perf_counter() - began) * 1e3)
    json.dump({"cycles_per_ms": per_ms, "spin_cycles": spin,
               "gpu_ms_median": statistics.median(gpu_ms),
               "step_ms_median": statistics.median(step_ms),
               "gpu_share": sum(gpu_ms) / sum(step_ms), "kept_mib": args.keep_mib * len(kept)},
              sys.stdout)


def union(args):
    """See the module's docstring: the device busy 5 ms a step, the spans 6 ms."""
    import trainscope  # pylint: disable=import-outside-toplevel
    import trainscope.torch as timer  # pylint: disable=import-outside-toplevel

    per_ms = cycles_per_ms()
    tmr = timer.CPUGPUTimer(require_gpu=True)
    with trainscope.start_run(root=args.root) as run:
        run.attach(tmr)
        for _ in range(args.steps):
            with tmr.scope(timer.TimeType.BATCH):
                with tmr.scope(timer.TimeType.FORWARD, gpu=True):
                    torch.cuda._sleep(int(2 * per_ms))  # pylint: disable=protected-access
                    with tmr.scope("LOSS", gpu=True):
                        torch.cuda._sleep(int(per_ms))  # pylint: disable=protected-access
                torch.cuda.synchronize()
                time.sleep(args.host_ms / 1e3)  # host work: the GPU idles
                with tmr.scope(timer.TimeType.BACKWARD, gpu=True):
                    torch.cuda._sleep(int(2 * per_ms))  # pylint: disable=protected-access
                torch.cuda.synchronize()
        tmr.complete_all()
        run_dir = run.dir
    json.dump({"run_dir": run_dir, "cycles_per_ms": per_ms}, sys.stdout)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["time", "kernels", "nvtx", "alloc", "steps", "union"])
    parser.add_argument("--root", default=None, help="union: where its run goes")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--gib", type=float, default=4)
    parser.add_argument("--hold", type=float, default=3)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--gpu-ms", type=float, default=10.0)
    parser.add_argument("--spin-cycles", type=int, default=0)
    parser.add_argument("--host-ms", type=float, default=10.0)
    parser.add_argument("--keep-mib", type=float, default=0.0)
    parser.add_argument("--cpu", action="store_true",
                        help="steps: no GPU (the job's own check, on any machine)")
    args = parser.parse_args()
    if not torch.cuda.is_available() and not (args.mode == "steps" and args.cpu):
        sys.exit("gpu_workload: torch sees no CUDA device")
    if args.mode == "time":
        time_kernels(args.reps)
    elif args.mode == "kernels":
        kernels(args.reps)
    elif args.mode == "nvtx":
        nvtx()
    elif args.mode == "steps":
        steps(args)
    elif args.mode == "union":
        union(args)
    else:
        alloc(args.gib, args.hold)


if __name__ == "__main__":
    main()
