#!/usr/bin/env python3
"""Where a build's time goes, per object file (the figures of docs/test-suite.md).

  build_times.py ninja BUILD_DIR [--top N]
      wall time of each output of the last build in BUILD_DIR/.ninja_log
  build_times.py launch LOG -- COMPILER ARGS...
      a compiler launcher: runs the compiler and appends its CPU seconds (user +
      system, itself and its children), wall seconds and output to LOG. CPU time
      holds on a loaded machine, where wall time does not:
        cmake ... -DCMAKE_CXX_COMPILER_LAUNCHER="python3;$PWD/scripts/build_times.py;launch;/tmp/cpu.tsv;--"
  build_times.py cpu LOG [--top N]
      the N objects of LOG that took most CPU, and the total, by target
"""

import argparse
import collections
import os
import resource
import subprocess
import sys
import time


def ninja_entries(build_dir):
    """{output: wall seconds} from BUILD_DIR/.ninja_log, the latest entry of each output
    (measure a fresh build directory: an output not rebuilt keeps an old figure)."""
    entries = {}
    with open(os.path.join(build_dir, ".ninja_log"), encoding="utf-8") as log:
        for line in log:
            fields = line.rstrip("\n").split("\t")
            if line.startswith("#") or len(fields) < 4:
                continue
            entries[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000
    return entries


def cpu_entries(log_path):
    entries = {}
    with open(log_path, encoding="utf-8") as log:
        for line in log:
            fields = line.rstrip("\n").split("\t")
            if len(fields) == 3:
                entries[fields[2]] = float(fields[0])
    return entries


def target_of(output):
    # CMake's object paths: [dir/]CMakeFiles/<target>.dir/<source>.o
    parts = output.split("/")
    for part in parts:
        if part.endswith(".dir"):
            return part[:-4]
    return output


def print_table(entries, top, unit):
    ranked = sorted(entries.items(), key=lambda kv: -kv[1])
    total = sum(entries.values())
    print(f"{len(entries)} outputs, {total:.0f} s {unit} in all")
    print(f"| {unit} s | share | output |")
    print("| ---: | ---: | --- |")
    for output, secs in ranked[:top]:
        print(f"| {secs:.1f} | {100 * secs / total:.1f}% | {output} |")
    by_target = collections.Counter()
    for output, secs in entries.items():
        by_target[target_of(output)] += secs
    print()
    print(f"| target | {unit} s | share |")
    print("| --- | ---: | ---: |")
    for target, secs in by_target.most_common(top):
        print(f"| {target} | {secs:.0f} | {100 * secs / total:.1f}% |")


def launch(log_path, command):
    began = time.monotonic()
    status = subprocess.call(command)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    output = command[command.index("-o") + 1] if "-o" in command else " ".join(command)[:200]
    with open(log_path, "a", encoding="utf-8") as log:  # one short write: atomic with O_APPEND
        log.write(f"{usage.ru_utime + usage.ru_stime:.2f}\t{time.monotonic() - began:.2f}\t"
                  f"{output}\n")
    return status


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["launch"]:
        if len(argv) < 4 or argv[2] != "--":
            print("usage: build_times.py launch LOG -- COMPILER ARGS...", file=sys.stderr)
            return 2
        return launch(argv[1], argv[3:])
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["ninja", "cpu"])
    parser.add_argument("path", help="the build directory (ninja) or the launcher's log (cpu)")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    if args.mode == "ninja":
        print_table(ninja_entries(args.path), args.top, "wall")
    else:
        print_table(cpu_entries(args.path), args.top, "CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
