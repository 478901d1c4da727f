#!/usr/bin/env python3
"""radT's way of sampling hardware, for bench/sampler_bench.cpp to measure.

  radt     radT's default listeners (smi+top+dcgmi+iostat+free), each as radT
           runs it: a multiprocessing.Process that starts the CLI with the
           same command line and parses its stdout line by line in Python,
           as radt/run/listeners/*_listener.py do. The parsed metrics are
           dropped (radT sends them to MLflow, not counted here, so the
           figure flatters radT). nvidia-smi and dcgmi only where installed.
  proc     a /proc-reading baseline: one Python loop at 1 Hz that reads and
           parses, by splitting text lines, the files trainscope's host
           sources read (/proc/stat, meminfo, diskstats, net/dev and the
           process tree's stat and io).

Runs for --seconds, then stops everything and prints one line per part:
  <part> tool_cpu_s <s> parse_cpu_s <s> lines <n>
tool_cpu_s is the CLI's CPU (getrusage(RUSAGE_CHILDREN) of its listener after
it terminated and reaped the CLI), parse_cpu_s the listener's own CPU since
it was forked (interpreter start-up is not counted: listeners are forked from
an already running interpreter). Usage: radt_baseline.py radt|proc [--seconds N]
"""

import argparse
import io
import multiprocessing as mp
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

# radT 0.2.x command lines (radt/run/listeners/*_listener.py).
TOP = "top -i -b -n 999999999 -d 1"
IOSTAT = "iostat 1 -m"
FREE = "free --mega --total -s 1"
SMI = ("nvidia-smi -l 1 --query-gpu=power.draw,timestamp,utilization.gpu,utilization.memory,"
       "memory.used,pstate --format=csv,nounits,noheader")
DCGMI = "dcgmi dmon -e 155,156,200,201,203,204,1001,1002,1003,1004,1005,1006,1007,1008,1009,1010,1011,1012"


def cpu(usage):
    return usage.ru_utime + usage.ru_stime


# --- parsers: the per-line work of radT's listeners ------------------------------

def parse_top(line, state, names=("python", "pt_data_worker")):
    m = {}
    line = line.lstrip()
    if line.startswith(("top", "Tasks", "%", "PID", " ")):
        return m
    words = line.strip().split()
    if line.startswith(("KiB", "MiB", "GiB")) and words:
        if words[1] == "Mem":
            state["flag"] = not state["flag"]
            if state["flag"] == state["prev"]:
                m["TOP - CPU Utilization"] = state["cpu"]
                m["TOP - Memory Utilization"] = state["mem"]
                state["prev"] = not state["flag"]
                state["cpu"] = state["mem"] = 0
            if len(words) > 8 and words[8] == "used,":
                m["TOP - Memory Usage GB"] = float(words[7]) / 1000
        elif words[1] == "Swap:":
            m["TOP - Swap Memory GB"] = float(words[6]) / 1000
    elif len(words) > 11 and words[11].strip() in names and state["flag"] != state["prev"]:
        state["cpu"] += float(words[8])
        state["mem"] += float(words[9])
    return m


def parse_iostat(line, state):
    m = {}
    line = line.lstrip()
    if not (line.startswith("nvme") or line.startswith("sd")):
        return m
    w = line.strip().split()
    try:
        dev = w[0]
        for key, i in (("tps", 1), ("MB read/s", 2), ("MB written/s", 3), ("MB read", 5),
                       ("MB written", 6)):
            m[f"iostat - {dev} - {key}"] = float(w[i])
        if dev in state["devices"]:
            m["iostat - Total tps"] = state["tps"]
            state["devices"] = set()
            state["tps"] = 0.0
        else:
            state["devices"].add(dev)
            state["tps"] += float(w[1])
    except (IndexError, ValueError):
        pass
    return m


def parse_free(line, state):
    m = {}
    w = line.strip().split()
    if not w:
        return m
    if "Mem:" in w[0]:
        for key, i in (("Total", 1), ("Used", 2), ("Free", 3), ("Shared", 4), ("Buff/Cache", 5),
                       ("Available", 6)):
            m[f"Free - Mem {key} GB"] = float(w[i]) / 1024
    elif "Swap:" in w[0] or "Total:" in w[0]:
        for key, i in (("Total", 1), ("Used", 2), ("Free", 3)):
            m[f"Free - {w[0][:-1]} {key} GB"] = float(w[i]) / 1024
    return m


def parse_smi(line, state):
    m = {}
    w = line.split(", ")
    if len(w) > 1 and w[0] != "#":
        for key, i in (("Power Draw", 0), ("GPU Util", 2), ("Mem Util", 3), ("Mem Used", 4)):
            try:
                m[f"SMI - {key}"] = float(w[i])
            except (ValueError, IndexError):
                m[f"SMI - {key}"] = -1.0
    return m


def parse_dcgmi(line, state):
    m = {}
    w = line.split()
    if not w or "POWER" in w or w[0].lower() in ("#", "id"):
        return m
    for i, value in enumerate(w[2:]):
        m[f"DCGMI - {i}"] = 0.0 if value == "N/A" else float(value)
    return m


# --- a listener: one process per CLI, as radT ----------------------------------------

def listener(name, command, parse, results):
    stop = {"now": False}
    tool = subprocess.Popen(command.split(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def on_term(signum, frame):
        stop["now"] = True
        tool.terminate()

    signal.signal(signal.SIGTERM, on_term)
    state = {"flag": False, "prev": True, "cpu": 0.0, "mem": 0.0, "devices": set(), "tps": 0.0}
    lines = 0
    sink = []  # radT hands each dict to MLflow; here it is kept and dropped
    for line in io.TextIOWrapper(tool.stdout, encoding="utf-8", errors="replace"):
        lines += 1
        m = parse(line, state)
        if m:
            sink.append(m)
            if len(sink) > 64:
                sink.clear()
    tool.wait()
    results.put((name, cpu(resource.getrusage(resource.RUSAGE_CHILDREN)),
                 cpu(resource.getrusage(resource.RUSAGE_SELF)), lines))


# --- the /proc-reading baseline ------------------------------------------------------

def tree(root):
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
    out = [root]
    for pid in out:
        out.extend(children.get(pid, []))
    return out


def proc_reader(name, seconds, root, results):
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda s, f: stop.update(now=True))
    lines = 0
    next_t = time.monotonic()
    end = next_t + seconds
    while not stop["now"] and next_t < end:
        values = {}
        for path in ("/proc/stat", "/proc/meminfo", "/proc/diskstats", "/proc/net/dev"):
            with open(path) as f:
                for line in f:
                    lines += 1
                    w = line.split()
                    if len(w) > 1:
                        values[f"{path}:{w[0]}"] = [float(x) for x in w[1:] if x.replace(".", "", 1).isdigit()]
        for pid in tree(root):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    text = f.read()
                fields = text[text.rfind(")") + 2:].split()
                values[f"{pid}:cpu"] = float(fields[11]) + float(fields[12])
                values[f"{pid}:rss"] = float(fields[21])
                with open(f"/proc/{pid}/io") as f:
                    for line in f:
                        key, value = line.split(":")
                        values[f"{pid}:{key}"] = float(value)
            except (OSError, IndexError, ValueError):
                continue
        next_t += 1.0
        time.sleep(max(0.0, next_t - time.monotonic()))
    results.put((name, 0.0, cpu(resource.getrusage(resource.RUSAGE_SELF)), lines))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["radt", "proc"])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--root-pid", type=int, default=os.getppid())
    args = parser.parse_args()
    mp.set_start_method("fork")
    results = mp.Queue()
    procs = []
    if args.mode == "radt":
        parts = [("top", TOP, parse_top), ("iostat", IOSTAT, parse_iostat),
                 ("free", FREE, parse_free)]
        if shutil.which("nvidia-smi"):
            parts.append(("nvidia-smi", SMI, parse_smi))
        if shutil.which("dcgmi"):
            parts.append(("dcgmi", DCGMI, parse_dcgmi))
        for name, command, parse in parts:
            if shutil.which(command.split()[0]) is None:
                print(f"{name} missing", flush=True)
                continue
            procs.append(mp.Process(target=listener, args=(name, command, parse, results)))
    else:
        procs.append(mp.Process(target=proc_reader,
                                args=("proc-reader", args.seconds, args.root_pid, results)))
    for p in procs:
        p.start()
    time.sleep(args.seconds)
    for p in procs:
        p.terminate()
    got = [results.get(timeout=30) for _ in procs]
    for p in procs:
        p.join()
    for name, tool_cpu, parse_cpu, lines in sorted(got):
        print(f"{name} tool_cpu_s {tool_cpu:.6f} parse_cpu_s {parse_cpu:.6f} lines {lines}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
