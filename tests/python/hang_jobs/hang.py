"""One rank of a two-rank gloo job (start it with diagnosis_jobs/launch2.py): every
step (BATCH, 10 ms) ends with an all-reduce (COMM). At step --hang-step, rank
--hang-rank stops before its all-reduce, so the other rank waits in it: --how
sleep calls sleep_forever(); --how deadlock takes two locks in the opposite order
of a helper thread ("lock-taker"), which then both wait forever; --how none never
stops (a steady job of --steps steps).
"""

import argparse
import threading
import time

import torch
import torch.distributed as dist

import trainscope


def sleep_forever():
    while True:
        time.sleep(1)


def deadlock():
    first, second = threading.Lock(), threading.Lock()
    both_hold = threading.Barrier(2)

    def take_the_other_way():
        with second:
            both_hold.wait()
            with first:
                pass

    helper = threading.Thread(target=take_the_other_way, name="lock-taker", daemon=True)
    helper.start()
    with first:
        both_hold.wait()
        with second:
            pass


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=100000)
    p.add_argument("--hang-rank", type=int, default=1)
    p.add_argument("--hang-step", type=int, default=20)
    p.add_argument("--how", choices=["sleep", "deadlock", "none"], default="sleep")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    tmr = trainscope.Timer()  # joins TRAINSCOPE_RUN_DIR as rank RANK
    x = torch.ones(1024)
    for step in range(args.steps):
        with tmr.scope(trainscope.TimeType.BATCH):
            time.sleep(0.01)
            if args.how != "none" and rank == args.hang_rank and step == args.hang_step:
                print(f"rank {rank} stops at step {step}", flush=True)
                sleep_forever() if args.how == "sleep" else deadlock()
            with tmr.scope("COMM"):
                dist.all_reduce(x)
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()
