"""A training loop of known costs for tests/python/test_stalls.py: each sample
is a file of the dataset, read and "decoded" by a CPU spin of --decode-ms (in
the loader's workers), and each step "computes" for --step-ms without using
the CPU (as a GPU step would). Prep per batch = batch * decode; the known prep
stall share follows (see the test).
"""

import argparse
import fcntl
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset

import trainscope


class Files(Dataset):
    def __init__(self, root, decode_s, sleep, shared_lock=None):
        self.paths = sorted(os.path.join(root, f) for f in os.listdir(root))
        self.decode_s = decode_s
        self.sleep = sleep
        self.shared_lock = shared_lock

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        with open(self.paths[index], "rb") as f:
            data = f.read()
        # The decode: CPU time of this thread, whatever else runs.
        began = time.time()  # wall clock, as the run's region rows
        if self.shared_lock:
            # One device for the whole node, serving one sample at a time
            # (as a disk or a decoder card): every worker of every process queues.
            with open(self.shared_lock, "a+b") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                time.sleep(self.decode_s)
                fcntl.flock(lock, fcntl.LOCK_UN)
        elif self.sleep:
            time.sleep(self.decode_s)
        else:
            until = time.thread_time() + self.decode_s
            while time.thread_time() < until:
                pass
        log = os.environ.get("STALLS_TEST_DECODE_LOG")
        if log:  # when each decode ran (wall clock, contention included), per run and process
            mode = os.environ.get("TRAINSCOPE_STALLS_MODE", "none")
            with open(os.path.join(log, f"decode-{mode}-{os.getpid()}.txt"), "a",
                      encoding="utf-8") as f:
                f.write(f"{began} {time.time()}\n")
        return torch.tensor(len(data), dtype=torch.float32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--num_workers", type=int, default=0)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--decode-ms", type=float, default=4)
    parser.add_argument("--step-ms", type=float, default=10)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--decode", choices=["spin", "sleep"], default="spin",
                        help="spin: CPU time per sample; sleep: waiting (remote decode, I/O)")
    parser.add_argument("--shared-lock", help="decode while holding an exclusive lock on this "
                        "file: a device the whole node shares, one sample at a time")
    parser.add_argument("--no-timed-loader", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    loader = DataLoader(Files(args.data, args.decode_ms / 1e3, args.decode == "sleep", args.shared_lock), batch_size=args.batch,
                        num_workers=args.num_workers, shuffle=True)
    tmr = trainscope.Timer()
    for _ in range(args.epochs):
        batches = loader if args.no_timed_loader else tmr.timed(loader)
        for _batch in batches:
            time.sleep(args.step_ms / 1e3)


if __name__ == "__main__":
    main()
