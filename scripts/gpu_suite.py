#!/usr/bin/env python3
"""The checks of scripts/gpu-suite.sh, against a CUDA build of trainscope:
GPU-labelled C++ tests, the GPU benchmarks, the Python GPU tests and
comparisons against the machine's own PyTorch, the LibTorch example; then the
rest of the C++ and Python tests as time allows. Writes report.json and
report.txt into --out (figures and pass/fail of each check) and prints the text.
Exit status 0 when nothing failed, 1 otherwise.
"""

import argparse
import glob
import json
import os
import re
import shlex
import signal
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

from ci_results import gtest_skip_reason  # scripts/ci_results.py, beside this file

STARTED = float(os.environ.get("TRAINSCOPE_GPU_SUITE_STARTED", time.time()))

# The Python tests that exercise a GPU (the rest run in the optional full pass).
# (file, pytest -k expression or None), in the order they run: the GPU truths first.
PYTHON_GPU_TESTS = [("test_gpu_truth.py", None), ("test_gpu_jobs.py", None),
                    ("test_torch.py", None), ("test_cpu_gpu_timer.py", None),
                    ("test_auto.py", "cuda"), ("test_simulated_gpu.py", None),
                    ("test_gpu_sync.py", None), ("test_gpu_labels.py", None),
                    ("test_gpu_energy.py", None)]
# A check's own timeout never runs past the deadline by more than this.
HARD_STOP_AFTER_DEADLINE_S = 45
# Benchmarks and the ratio each must stay under (0: reported only).
BENCH_RATIOS = [
    ("BM_CPUGPUTimerPairCuda", "BM_BareCudaEventRecordPair", 1.2),
    ("BM_TimerPair/nvtx:0", "BM_BareSteadyClockPair", 1.25),
    ("BM_TimerPair/nvtx:1", "BM_BareSteadyClockPair", 1.5),
    ("BM_CPUGPUTimerPairCpuOnly", "BM_BareSteadyClockPair", 2.0),
]


class Suite:
    def __init__(self, args):
        self.args = args
        self.results = []
        self.facts = {}
        self._libtorch = None  # the LibTorch example's build, in the background
        os.makedirs(args.out, exist_ok=True)

    def elapsed(self):
        return time.time() - STARTED

    def time_left(self):
        return self.args.deadline - self.elapsed()

    def add(self, name, status, figures=None, detail="", seconds=None):
        self.results.append({"name": name, "status": status, "figures": figures or {},
                             "detail": detail, "seconds": seconds})
        mark = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}[status]
        print(f"gpu-suite [{self.elapsed():.0f}s] {mark} {name}"
              + (f": {detail}" if detail and status != "pass" else ""), flush=True)
        self.write_report()  # a suite stopped from outside leaves what it found so far

    def sh(self, command, timeout, log=None, env=None, cwd=None):
        """(exit status, output); 124 on timeout. The output also goes to out/<log>.
        The timeout ends at the deadline's hard stop at the latest."""
        hard_left = self.time_left() + HARD_STOP_AFTER_DEADLINE_S
        timeout = max(10, min(timeout, int(hard_left)))
        try:
            # One output stream (stderr into stdout), in its own process group: on timeout
            # the group gets SIGINT first (pytest then writes its JUnit report, a gtest
            # binary dies), SIGKILL 10 s later.
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       env=env, cwd=cwd, start_new_session=True)
        except OSError as e:
            return 127, str(e)
        try:
            out, _ = process.communicate(timeout=timeout)
            rc = process.returncode
            output = out.decode(errors="replace")
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGINT)
                out, _ = process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                out, _ = process.communicate()
            except ProcessLookupError:
                out, _ = process.communicate()
            rc = 124
            output = (out or b"").decode(errors="replace") + f"\n(timed out after {timeout} s)"
        if log:
            with open(os.path.join(self.args.out, log), "w", encoding="utf-8") as f:
                f.write(output)
        return rc, output

    def env(self, **extra):
        env = dict(os.environ)
        build = self.args.build
        env["PYTHONPATH"] = os.path.join(build, "python")
        env["TRAINSCOPE_CLI"] = os.path.join(build, "tools", "trainscope")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra)
        return env

    # --- the checks -----------------------------------------------------------

    def machine_facts(self):
        def first_line(command):
            rc, output = self.sh(command, 60)
            lines = [line for line in output.splitlines() if line.strip()]
            return lines[-1].strip() if rc == 0 and lines else f"(unavailable: exit {rc})"

        py = self.args.python
        self.facts = {
            "gpu": first_line(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                               "clocks.max.sm,power.limit", "--format=csv,noheader"]),
            "nvcc": first_line(["nvcc", "--version"]),
            "python": first_line([py, "--version"]),
            "torch": first_line([py, "-c", "import torch; print(torch.__version__, "
                                 "'cuda', torch.version.cuda, torch.cuda.is_available())"]),
            "ncu": first_line(["ncu", "--version"]) if shutil.which("ncu") else "not on PATH",
            "nsys": shutil.which("nsys") or "not on PATH",
            "libdcgm": first_line(["sh", "-c", "ldconfig -p | grep -m1 libdcgm.so || "
                                   "echo 'not installed'"]),
            "kernel": first_line(["uname", "-r"]),
            "os": first_line(["sh", "-c", ". /etc/os-release; echo $PRETTY_NAME"]),
            "compiler": first_line(["sh", "-c", "c++ --version | head -1"]),
            "cmake": first_line(["sh", "-c", "cmake --version | head -1"]),
        }
        for key, value in self.facts.items():
            print(f"gpu-suite: {key}: {value}", flush=True)

    def gtests(self):
        binaries = sorted(b for b in glob.glob(os.path.join(self.args.build, "tests", "gpu_*"))
                          if os.access(b, os.X_OK) and os.path.isfile(b))
        if not binaries:
            self.add("C++ GPU tests", "fail", detail="no gpu_* test binary in the build")
        for binary in binaries:
            name = os.path.basename(binary)
            report = os.path.join(self.args.out, f"gtest-{name}.json")
            began = time.time()
            rc, output = self.sh([binary, f"--gtest_output=json:{report}"], 180,
                                 log=f"gtest-{name}.log")
            if not os.path.exists(report):
                self.add(f"{name}", "fail", detail=f"exit {rc}, no report:\n{output[-1500:]}")
                continue
            with open(report, encoding="utf-8") as f:
                doc = json.load(f)
            standard = {"name", "status", "result", "timestamp", "time", "classname", "failures",
                        "file", "line", "skipped"}
            for suite in doc.get("testsuites", []):
                for case in suite.get("testsuite", []):
                    full = f"{suite['name']}.{case['name']}"
                    figures = {k: v for k, v in case.items() if k not in standard}
                    if case.get("failures"):
                        detail = " | ".join(f.get("failure", "")[:600] for f in case["failures"])
                        self.add(f"C++ {full}", "fail", figures, detail)
                    elif case.get("result") == "SKIPPED":
                        reason = gtest_skip_reason(output, full)
                        self.add(f"C++ {full}", "skip", figures, reason)
                    else:
                        self.add(f"C++ {full}", "pass", figures)
            if rc not in (0, 1):
                self.add(f"{name} exit", "fail", detail=f"exit {rc}: {output[-1500:]}",
                         seconds=time.time() - began)

    def benchmarks(self):
        bench = os.path.join(self.args.build, "bench", "timer_bench")
        if not os.path.exists(bench):
            self.add("timer_bench", "fail", detail="bench/timer_bench was not built")
            return
        names = sorted({n for pair in BENCH_RATIOS for n in pair[:2]})
        pattern = "^(" + "|".join(re.escape(n) for n in names) + ")$"
        report = os.path.join(self.args.out, "timer_bench.json")
        rc, output = self.sh([bench, f"--benchmark_filter={pattern}", "--benchmark_repetitions="
                              + os.environ.get("TRAINSCOPE_GPU_SUITE_BENCH_REPS", "5"),
                              "--benchmark_report_aggregates_only=true",
                              f"--benchmark_out={report}", "--benchmark_out_format=json"], 600,
                             log="timer_bench.log")
        if rc != 0 or not os.path.exists(report):
            self.add("timer_bench", "fail", detail=f"exit {rc}: {output[-1500:]}")
            return
        with open(report, encoding="utf-8") as f:
            doc = json.load(f)
        median, errors, counters = {}, {}, {}
        for b in doc.get("benchmarks", []):
            if b.get("error_occurred"):
                errors[b.get("run_name", b["name"])] = b.get("error_message", "")
            elif b.get("aggregate_name") == "median":
                median[b["run_name"]] = b["real_time"]
                for key in ("blocking_waits_in_loop",):
                    if key in b:
                        counters[f"{b['run_name']} {key}"] = b[key]
        for name, baseline, target in BENCH_RATIOS:
            if name not in median or baseline not in median:
                why = errors.get(name) or errors.get(baseline) or "not measured"
                self.add(f"bench {name} / {baseline}", "fail", detail=why)
                continue
            ratio = median[name] / median[baseline]
            figures = {"ratio": round(ratio, 3), "ns": round(median[name], 2),
                       "baseline_ns": round(median[baseline], 2), "target": target}
            figures.update({k: v for k, v in counters.items() if k.startswith(name + " ")})
            ok = target == 0 or ratio <= target
            self.add(f"bench {name} / {baseline}", "pass" if ok else "fail", figures,
                     f"ratio {ratio:.3f} > target {target}")

    def pytest(self, name, files, timeout, extra=(), optional=False):
        if self.args.no_python_reason:
            self.add(name, "skip", detail=self.args.no_python_reason)
            return
        junit = os.path.join(self.args.out, f"{name}.xml")
        tests = os.path.join(self.args.repo, "tests", "python")
        command = [self.args.python, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rs",
                   f"--junitxml={junit}", *extra, *[os.path.join(tests, f) for f in files]]
        rc, output = self.sh(command, timeout, log=f"{name}.log", env=self.env(),
                             cwd=self.args.repo)
        if not os.path.exists(junit):
            # Stopped before pytest wrote its report: what -v printed of each test that ended.
            for test, outcome in re.findall(r"^\S*tests/python/(\S+::\S+) (PASSED|FAILED|SKIPPED|"
                                            r"ERROR)", output, re.M):
                status = {"PASSED": "pass", "SKIPPED": "skip"}.get(outcome, "fail")
                self.add(f"py {test.replace('.py::', '.')}", status,
                         detail=f"{outcome} (details in {name}.log)")
            self.add(name, "skip" if rc == 124 and optional else "fail",
                     detail=f"exit {rc}, no JUnit report:\n{output[-2000:]}")
            return
        for case in ET.parse(junit).getroot().iter("testcase"):
            full = f"{case.get('classname', '')}.{case.get('name')}".split("tests.python.")[-1]
            figures = {p.get("name"): _number(p.get("value"))
                       for p in case.iter("property")}
            failure = case.find("failure")
            if failure is None:
                failure = case.find("error")
            skipped = case.find("skipped")
            if failure is not None:
                text = (failure.get("message") or "") + "\n" + (failure.text or "")
                self.add(f"py {full}", "fail", figures, text.strip()[-1500:])
            elif skipped is not None:
                self.add(f"py {full}", "skip", figures, skipped.get("message", ""))
            else:
                self.add(f"py {full}", "pass", figures)
        if rc == 124:
            self.add(name, "fail", detail=f"timed out after {timeout} s")

    def libtorch_start(self):
        """Configures and builds the LibTorch example in its own tree, in the background
        (nice 19) while the GPU checks run: Torch's CMake files stay out of the main build."""
        rc, prefix = self.sh([self.args.python, "-c",
                              "import torch.utils; print(torch.utils.cmake_prefix_path)"], 120)
        if rc != 0:
            self.add("LibTorch example", "skip", detail="this Python has no torch")
            return
        prefix = prefix.strip().splitlines()[-1]
        build = os.path.join(os.path.dirname(self.args.build), "libtorch-example")
        cmake_args = list(self.args.cmake_arg)
        for i, arg in enumerate(cmake_args):
            if arg.startswith("-DCMAKE_PREFIX_PATH="):
                cmake_args[i] = arg + ";" + prefix if arg.split("=", 1)[1] else \
                    "-DCMAKE_PREFIX_PATH=" + prefix
        if not any(a.startswith("-DCMAKE_PREFIX_PATH=") for a in cmake_args):
            cmake_args.append("-DCMAKE_PREFIX_PATH=" + prefix)
        configure = ["cmake", "-S", self.args.repo, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                     "-DTRAINSCOPE_WITH_CUDA=ON", "-DTRAINSCOPE_BUILD_TESTS=OFF",
                     "-DTRAINSCOPE_BUILD_BENCHMARKS=OFF", "-DTRAINSCOPE_BUILD_CLI=OFF",
                     "-DTRAINSCOPE_BUILD_EXAMPLES=ON", *cmake_args]
        jobs = max(1, self.args.jobs - 2)
        script = (f"{_quote(configure)} > {_quote([os.path.join(self.args.out, 'libtorch-configure.log')])} 2>&1 && "
                  f"cmake --build {_quote([build])} --target libtorch_train -j{jobs} "
                  f"> {_quote([os.path.join(self.args.out, 'libtorch-build.log')])} 2>&1")
        self._libtorch = (time.time(), build,
                          subprocess.Popen(["nice", "-n", "19", "sh", "-c", script],
                                           start_new_session=True))
        print(f"gpu-suite [{self.elapsed():.0f}s] LibTorch example: building in the background",
              flush=True)

    def libtorch_finish(self):
        if self._libtorch is None:
            return
        began, build, process = self._libtorch
        try:
            rc = process.wait(timeout=max(10, self.time_left() + HARD_STOP_AFTER_DEADLINE_S - 60))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)  # the build's whole process group
            self.add("LibTorch example", "fail", detail="its build did not end before the deadline")
            return
        configure_log = os.path.join(self.args.out, "libtorch-configure.log")
        with open(configure_log, encoding="utf-8", errors="replace") as f:
            configured = f.read()
        if "libtorch_train with Torch" not in configured:
            self.add("LibTorch example", "fail",
                     detail="Torch found no libtorch_train target: " + configured[-1500:])
            return
        if rc != 0:
            with open(os.path.join(self.args.out, "libtorch-build.log"), encoding="utf-8",
                      errors="replace") as f:
                self.add("LibTorch example", "fail", detail=f"build: exit {rc}: {f.read()[-2000:]}")
            return
        binary = os.path.join(build, "examples", "libtorch_train")
        rc, output = self.sh([binary, "--epochs", "2"], 300, log="libtorch-run.log")
        gpu_line = next((line for line in output.splitlines() if line.startswith("GPU timing:")),
                        "")
        figures = {"gpu_timing": gpu_line}
        gpu_section = re.search(r"\nGPU\n(.*?)(\n\n|\Z)", output, re.S)
        figures["gpu_keys_timed"] = len(re.findall(r"\nmin: ", "\n" + gpu_section.group(1))) \
            if gpu_section else 0
        ok = rc == 0 and "CUDA" in gpu_line and figures["gpu_keys_timed"] > 0
        self.add("LibTorch example with gpu=true regions", "pass" if ok else "fail", figures,
                 f"exit {rc}: {output[-1500:]}", seconds=time.time() - began)

    def ctest_rest(self):
        junit = os.path.join(self.args.out, "ctest.xml")
        timeout = max(60, int(self.time_left()) - 120)
        # The GPU build made only what the GPU checks need: the rest first.
        rc, output = self.sh(["cmake", "--build", self.args.build, f"-j{self.args.jobs}"],
                             timeout, log="build-rest.log")
        if rc != 0:
            self.add("all C++ tests on the GPU machine", "fail" if rc != 124 else "skip",
                     detail=f"building the rest: exit {rc}: {output[-1500:]}")
            return
        timeout = max(60, int(self.time_left()) - 120)
        rc, output = self.sh(["ctest", "--test-dir", self.args.build, f"-j{self.args.jobs}",
                              "-LE", "python|gpu", "--output-on-failure", "--timeout", "300",
                              f"--output-junit={junit}"], timeout, log="ctest.log")
        line = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", output)
        failed = re.findall(r"^\s*\d+ - (\S+) \(Failed|Timeout|SEGFAULT|Subprocess aborted",
                            output, re.M)
        if not line and rc == 124:
            self.add("all C++ tests on the GPU machine", "skip",
                     detail=f"ran out of time before the deadline's hard stop: {output[-500:]}")
            return
        if not line:
            self.add("all C++ tests on the GPU machine", "fail", detail=output[-2000:])
            return
        figures = {"failed": int(line.group(2)), "total": int(line.group(3))}
        self.add("all C++ tests on the GPU machine", "pass" if figures["failed"] == 0 else "fail",
                 figures, "failed: " + " ".join(f for f in failed if f))

    def guarded(self, name, check, *args, **kwargs):
        """Runs one check; a check that breaks is its own failure, not the suite's end."""
        try:
            check(*args, **kwargs)
        except Exception:  # pylint: disable=broad-except
            import traceback  # pylint: disable=import-outside-toplevel
            self.add(name, "fail", detail="the check itself broke: " + traceback.format_exc())

    def wanted(self, check):
        only = [c for c in self.args.only.split(",") if c]
        return not only or check in only

    def run(self):
        self.guarded("machine facts", self.machine_facts)
        if self.wanted("libtorch"):
            self.guarded("LibTorch example", self.libtorch_start)
        if self.wanted("gtests"):
            self.guarded("C++ GPU tests", self.gtests)
        if self.wanted("bench"):
            self.guarded("timer_bench", self.benchmarks)
        for name, select in PYTHON_GPU_TESTS:  # one pytest each: a hang loses one file's
            if not self.wanted("py:" + name):
                continue
            if self.time_left() > 20:
                self.guarded(name, self.pytest, "pytest-" + name[:-3], [name], 900,
                             extra=["-k", select] if select else [])
            else:
                self.add(f"py {name}", "skip",
                         detail=f"only {self.time_left():.0f} s left before the deadline")
        self.guarded("LibTorch example", self.libtorch_finish)
        if not self.wanted("rest"):
            return self.report()
        if self.time_left() > 150:
            self.guarded("all C++ tests on the GPU machine", self.ctest_rest)
        else:
            self.add("all C++ tests on the GPU machine", "skip",
                     detail=f"only {self.time_left():.0f} s left before the deadline")
        if self.time_left() > 150:
            rest = sorted(os.path.basename(p) for p in glob.glob(
                os.path.join(self.args.repo, "tests", "python", "test_*.py"))
                if os.path.basename(p) not in [n for n, k in PYTHON_GPU_TESTS if k is None])
            self.pytest("pytest-rest", rest, max(60, int(self.time_left()) - 30),
                        extra=["-x"] if self.args.stop_first else [], optional=True)
        else:
            self.add("the other Python tests", "skip",
                     detail=f"only {self.time_left():.0f} s left before the deadline")
        return self.report()

    def report(self):
        text, counts = self.write_report()
        print(text, flush=True)
        return 1 if counts["fail"] else 0

    def write_report(self):
        counts = {s: sum(r["status"] == s for r in self.results) for s in ("pass", "fail", "skip")}
        doc = {"facts": self.facts, "summary": counts, "seconds": round(self.elapsed(), 1),
               "results": self.results}
        with open(os.path.join(self.args.out, "report.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, default=str)
        lines = ["trainscope GPU suite", ""]
        lines += [f"  {k:9} {v}" for k, v in self.facts.items()]
        lines += ["", "Figures:"]
        for r in self.results:
            if r["figures"]:
                shown = ", ".join(f"{k}={_short(v)}" for k, v in r["figures"].items())
                lines.append(f"  {r['name']}: {shown}")
        lines += ["", "Failed and skipped:"]
        for r in self.results:
            if r["status"] != "pass":
                detail = " ".join(str(r["detail"]).split())[:400]
                lines.append(f"  {r['status'].upper()} {r['name']}: {detail}")
        lines += ["", f"gpu-suite: {counts['pass']} passed, {counts['fail']} failed, "
                  f"{counts['skip']} skipped in {self.elapsed():.0f} s "
                  f"(report: {os.path.join(self.args.out, 'report.txt')})"]
        text = "\n".join(lines) + "\n"
        with open(os.path.join(self.args.out, "report.txt"), "w", encoding="utf-8") as f:
            f.write(text)
        return text, counts


def _quote(words):
    return " ".join(shlex.quote(str(w)) for w in words)


def _number(text):
    try:
        return float(text) if "." in text or "e" in text.lower() else int(text)
    except (TypeError, ValueError):
        return text


def _short(value):
    if isinstance(value, float):
        return f"{value:.6g}"
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "..."


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--build", required=True, help="the CUDA build tree")
    parser.add_argument("--out", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--deadline", type=float, default=540,
                        help="seconds after the suite started: no optional check starts later")
    parser.add_argument("--cmake-arg", action="append", default=[],
                        help="passed to the LibTorch example's configure")
    parser.add_argument("--only", default="",
                        help="comma-separated checks to run: gtests, bench, libtorch, "
                             "py:FILE, rest (default: all)")
    parser.add_argument("--no-python-reason", default="",
                        help="the Python module was not built, for this reason: the Python "
                             "checks are skipped with it")
    parser.add_argument("--stop-first", action="store_true",
                        help="stop the optional Python pass at its first failure")
    args = parser.parse_args()
    sys.exit(Suite(args).run())


if __name__ == "__main__":
    main()
