"""How often a two-rank DDP job under `trainscope run --auto` hangs at exit (issue 39).

    TRAINSCOPE_CLI=<build>/tools/trainscope PYTHONPATH=<build>/python \\
        python bench/ddp_exit_hang.py [--jobs N] [--limit S] [--burner]

Runs tests/python/auto_jobs/comm_train.py (a job's own communication hook that delays the
last bucket 0.2 s, 20 steps; trainscope wraps it and times every bucket) as two gloo ranks
(tests/python/diagnosis_jobs/launch2.py) N times; a job still running after --limit seconds
(it takes about 5) is a hang: its processes are killed and counted. --burner runs a busy
process per CPU beside the jobs (the hang is a race that load makes likelier). Torch runs a
future's Python callback on gloo's thread and releases it there, needing the GIL; a process
group destroyed with the GIL held joins that thread. Before trainscope drained its callbacks
(_torch_comm.drain), 1 job in about 25 hung on a loaded 2-core machine.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests", "python")
JOB = os.path.join(TESTS, "auto_jobs", "comm_train.py")
LAUNCH2 = os.path.join(TESTS, "diagnosis_jobs", "launch2.py")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--limit", type=float, default=60.0)
    parser.add_argument("--burner", action="store_true")
    args = parser.parse_args()
    cli = os.environ["TRAINSCOPE_CLI"]
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(os.cpu_count() or 1)] if args.burner else []
    hangs, failures, seconds = 0, 0, []
    try:
        for job in range(args.jobs):
            with tempfile.TemporaryDirectory() as root:
                argv = [cli, "run", "--root", root, "--no-sample", "--quiet", "--auto", "--",
                        sys.executable, LAUNCH2, JOB, "--hook", "before", "--delay-bucket",
                        "1", "--steps", "20", "--delay-s", "0.2"]
                start = time.monotonic()
                proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
                try:
                    code = proc.wait(timeout=args.limit)
                    seconds.append(time.monotonic() - start)
                    failures += code != 0
                except subprocess.TimeoutExpired:
                    hangs += 1
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            print(f"job {job + 1}/{args.jobs}: {hangs} hung, {failures} failed", flush=True)
    finally:
        for burner in burners:
            burner.kill()
    seconds.sort()
    median = seconds[len(seconds) // 2] if seconds else float("nan")
    print(f"ddp_exit_hang: {args.jobs} jobs, {hangs} hung (> {args.limit:.0f} s), "
          f"{failures} failed, median {median:.1f} s, burner {'on' if args.burner else 'off'}")


if __name__ == "__main__":
    main()
