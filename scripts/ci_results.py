#!/usr/bin/env python3
"""CI's count of what ran: reads the JUnit reports of ctest (--output-junit) and
pytest (--junitxml, junit_family=xunit1), classifies every test as passed,
failed or skipped, and checks each skip against the rules of
.ci/expected-skips.txt: a skip no rule expects on this machine is a failure.

  ci_results.py --expected .ci/expected-skips.txt \\
      --ctest release=build-ci/release.junit.xml \\
      --pytest python=build-ci/release/python_tests.xml --ctest python=... \\
      [--stage release=812/900 ...] [--gpu | --no-gpu] [--slowest N]

A step may have both a ctest and a pytest report: its ctest "python_tests" (the
whole pytest suite as one ctest) is then replaced by the tests of the pytest
report. Prints each skip with its reason, the failures and unexpected skips,
the stages' wall times, and last "ci: N passed, N failed, N skipped" (an
unexpected skip counts as failed). Exit status 0 when nothing failed, 1 when
something did, 2 on a usage error or a bad rules file.

Rules file: one rule a line, "WHEN | TEST | REASON  # why", where
  WHEN    is any, gpu, nogpu, root or nonroot (several joined by ","; all must
          hold on this machine for the rule to apply),
  TEST    matches "STEP: TEST-ID" (ctest's test name, or pytest's
          tests/python/FILE.py::TEST), and
  REASON  matches the skip's reason (white space runs read as one space);
in both, "*" matches any text and every other character itself. The comment
after "#" (why the skip is expected on CI) is required.
"""

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

# The ctest that runs the whole pytest suite (bindings/python/CMakeLists.txt).
PYTEST_CTEST_NAMES = ("python_tests",)
CONDITIONS = ("any", "gpu", "nogpu", "root", "nonroot")
# ctest's <skipped message> of a test it skipped on purpose; any other "notrun"
# (an executable not found, a failed fixture) is a failure, as ctest counts it.
CTEST_SKIP_MESSAGES = ("SKIP_REGULAR_EXPRESSION_MATCHED", "SKIP_RETURN_CODE")


@dataclasses.dataclass
class Result:
    step: str
    test: str
    outcome: str  # "passed", "failed" or "skipped"
    reason: str = ""  # a skip's reason, a failure's message
    seconds: float = 0.0

    @property
    def name(self):
        return f"{self.step}: {self.test}"


@dataclasses.dataclass
class Rule:
    line: int
    when: tuple
    test: str
    reason: str
    why: str

    def applies(self, facts):
        return all(_condition_holds(c, facts) for c in self.when)

    def matches(self, result):
        return (_glob(self.test).fullmatch(result.name) is not None
                and _glob(self.reason).fullmatch(_one_line(result.reason)) is not None)


@dataclasses.dataclass
class Summary:
    passed: list
    failed: list  # Results that failed (a step's missing report is one too)
    expected: list  # (Result, Rule) of the skips a rule expects
    unexpected: list  # skipped Results no applying rule matches
    unused: list  # applying Rules that matched no skip

    @property
    def failed_count(self):
        return len(self.failed) + len(self.unexpected)


def _condition_holds(condition, facts):
    return {"any": True, "gpu": bool(facts["gpu"]), "nogpu": not facts["gpu"],
            "root": bool(facts["root"]), "nonroot": not facts["root"]}[condition]


def _glob(pattern):
    return re.compile(".*".join(re.escape(part) for part in _one_line(pattern).split("*")),
                      re.S)


def _one_line(text):
    return " ".join(str(text).split())


def parse_rules(text, origin="expected-skips"):
    """The rules of an expected-skips file; ValueError naming the line when one is bad."""
    rules = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        body, hash_, why = line.partition("#")
        why = why.strip()
        fields = [f.strip() for f in body.split("|")]
        where = f"{origin}:{number}"
        if len(fields) != 3 or not all(fields):
            raise ValueError(f"{where}: expected 'WHEN | TEST | REASON  # why', got {line!r}")
        if not hash_ or not why:
            raise ValueError(f"{where}: the rule has no comment saying why the skip is expected")
        when = tuple(c.strip() for c in fields[0].split(","))
        unknown = [c for c in when if c not in CONDITIONS]
        if unknown:
            raise ValueError(f"{where}: unknown condition {unknown[0]!r} "
                             f"(one of {', '.join(CONDITIONS)})")
        rules.append(Rule(number, when, fields[1], fields[2], why))
    return rules


def gtest_skip_reason(output, test):
    """The message of GTEST_SKIP() in a gtest binary's output: the lines between
    "FILE:LINE: Skipped" and "[  SKIPPED ] TEST (N ms)"."""
    marker = f"[  SKIPPED ] {test} ("
    at = output.find(marker)
    if at < 0:
        return ""
    before = output[:at].rstrip().splitlines()
    for i in range(len(before) - 1, -1, -1):
        if before[i].rstrip().endswith(": Skipped"):
            return " ".join(line.strip() for line in before[i + 1:] if line.strip())
    return before[-1].strip() if before else ""


def _last_line(text):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def read_ctest_junit(path, step):
    """One Result per ctest test of ctest's --output-junit report."""
    results = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        status = case.get("status", "")
        output = case.findtext("system-out") or ""
        seconds = float(case.get("time") or 0)
        skipped = case.find("skipped")
        message = skipped.get("message", "") if skipped is not None else ""
        if status == "run" and case.find("failure") is None:
            results.append(Result(step, name, "passed", seconds=seconds))
        elif status == "notrun" and message.startswith(CTEST_SKIP_MESSAGES):
            reason = gtest_skip_reason(output, name) or _last_line(output) or message
            results.append(Result(step, name, "skipped", reason, seconds))
        elif status == "disabled":
            results.append(Result(step, name, "skipped", "disabled (the DISABLED property)"))
        else:  # ctest's log above has the output (--output-on-failure)
            failure = case.find("failure")
            detail = message or (failure.get("message", "") if failure is not None else "")
            results.append(Result(step, name, "failed", detail, seconds))
    return results


def _pytest_id(case):
    name = case.get("name", "")
    classname = case.get("classname", "")
    path = case.get("file")
    if path:
        module = path[:-3].replace("/", ".") if path.endswith(".py") else path
        rest = classname[len(module) + 1:] if classname.startswith(module + ".") else ""
        return "::".join(p for p in (path, rest.replace(".", "::"), name) if p)
    return f"{classname}::{name}" if classname else name


def read_pytest_junit(path, step):
    """One Result per pytest test of pytest's --junitxml report (an xfail is a skip:
    the test's body did not pass)."""
    results = []
    for case in ET.parse(path).getroot().iter("testcase"):
        test = _pytest_id(case)
        seconds = float(case.get("time") or 0)
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        skipped = case.find("skipped")
        if problem is not None:
            detail = problem.get("message") or _last_line(problem.text)
            results.append(Result(step, test, "failed", detail, seconds))
        elif skipped is not None:
            reason = skipped.get("message", "")
            if skipped.get("type") == "pytest.xfail":
                reason = f"xfail: {reason}"
            results.append(Result(step, test, "skipped", reason, seconds))
        else:
            results.append(Result(step, test, "passed", seconds=seconds))
    return results


def _read(reader, path, step):
    """(results, None), or (None, why) when the report is missing or unreadable."""
    if not os.path.exists(path):
        return None, f"no report at {path}"
    try:
        return reader(path, step), None
    except (ET.ParseError, OSError, ValueError) as error:
        return None, f"{path}: {error}"


def collect(ctest_reports, pytest_reports):
    """Results of every step. ctest_reports, pytest_reports: {step: path}. A step's
    missing or unreadable report, or one with no test, is a failure of that step."""
    results = []
    for step in dict.fromkeys([*ctest_reports, *pytest_reports]):
        ctest = []
        if step in ctest_reports:
            ctest, problem = _read(read_ctest_junit, ctest_reports[step], step)
            if problem:
                results.append(Result(step, "(ctest report)", "failed", problem))
                continue
        wrappers = [r for r in ctest if r.test in PYTEST_CTEST_NAMES]
        if step in pytest_reports:
            pytest, problem = _read(read_pytest_junit, pytest_reports[step], step)
            if problem and any(w.outcome == "failed" for w in wrappers):
                # pytest was stopped before it wrote its report: the ctest's failure is it.
                for wrapper in wrappers:
                    wrapper.reason = (f"{problem}: the suite did not finish (a timeout or a "
                                      "crash: see its ctest log)")
            elif problem:
                results.append(Result(step, "(pytest report)", "failed", problem))
            else:
                for wrapper in wrappers:
                    ctest.remove(wrapper)
                    if wrapper.outcome == "failed" and not any(r.outcome == "failed"
                                                               for r in pytest):
                        # pytest's report names no failure: the suite timed out or crashed.
                        results.append(Result(step, wrapper.test, "failed",
                                              wrapper.reason or "failed with no test failing in "
                                              "pytest's report (timeout or crash)",
                                              wrapper.seconds))
                    elif wrapper.outcome == "skipped":
                        results.append(wrapper)
                ctest += pytest
        if not ctest and not any(r.step == step for r in results):
            results.append(Result(step, "(no test)", "failed", "the step ran no tests"))
        results.extend(ctest)
    return results


def classify(results, rules, facts):
    applying = [rule for rule in rules if rule.applies(facts)]
    summary = Summary([], [], [], [], [])
    used = set()
    for result in results:
        if result.outcome == "passed":
            summary.passed.append(result)
        elif result.outcome == "failed":
            summary.failed.append(result)
        else:
            rule = next((r for r in applying if r.matches(result)), None)
            if rule is None:
                summary.unexpected.append(result)
            else:
                used.add(rule.line)
                summary.expected.append((result, rule))
    summary.unused = [rule for rule in applying if rule.line not in used]
    return summary


def machine_facts():
    gpu = False
    if shutil.which("nvidia-smi"):
        try:
            listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                                     timeout=60, check=False)
            gpu = listing.returncode == 0 and "GPU " in listing.stdout
        except (OSError, subprocess.TimeoutExpired):
            gpu = False
    return {"gpu": gpu, "root": os.geteuid() == 0}


def format_stage(spec):
    """'release=812/900' -> 'release 812 s (budget 900 s)'; over budget says so."""
    name, _, figures = spec.partition("=")
    took, _, budget = figures.partition("/")
    text = f"{name} {took} s"
    if budget:
        text += f" (budget {budget} s{', OVER' if float(took) > float(budget) else ''})"
    return text


def report(summary, rules_path, stages=(), slowest=0, results=()):
    lines = []
    for result, _ in summary.expected:
        lines.append(f"ci: skipped: {result.name}: {_one_line(result.reason)}")
    for rule in summary.unused:
        lines.append(f"ci: note: {rules_path}:{rule.line} expects a skip that did not happen "
                     f"({rule.test} | {rule.reason})")
    if slowest:
        for step in dict.fromkeys(r.step for r in results):
            ranked = sorted((r for r in results if r.step == step), key=lambda r: -r.seconds)
            shown = ", ".join(f"{r.test} {r.seconds:.1f} s" for r in ranked[:slowest])
            lines.append(f"ci: slowest of {step}: {shown}")
    for result in summary.failed:
        detail = f" ({_one_line(result.reason)[:200]})" if result.reason else ""
        lines.append(f"ci: failed: {result.name}{detail}")
    for result in summary.unexpected:
        lines.append(f"ci: unexpected skip: {result.name}: {_one_line(result.reason)} "
                     f"(no rule of {rules_path} expects it here)")
    if stages:
        lines.append("ci: stage times: " + ", ".join(format_stage(s) for s in stages))
    lines.append(f"ci: {len(summary.passed)} passed, {summary.failed_count} failed, "
                 f"{len(summary.expected)} skipped")
    return lines


def _steps(pairs, option):
    steps = {}
    for pair in pairs:
        step, sep, path = pair.partition("=")
        if not sep or not step:
            raise SystemExit(f"ci_results: {option} takes STEP=FILE, not {pair!r}")
        steps[step] = path
    return steps


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expected", required=True, help="the rules file (.ci/expected-skips.txt)")
    parser.add_argument("--ctest", action="append", default=[], metavar="STEP=FILE")
    parser.add_argument("--pytest", action="append", default=[], metavar="STEP=FILE")
    parser.add_argument("--stage", action="append", default=[], metavar="NAME=SECONDS[/BUDGET]")
    parser.add_argument("--slowest", type=int, default=0, help="list the N slowest tests a step")
    gpu = parser.add_mutually_exclusive_group()
    gpu.add_argument("--gpu", dest="gpu", action="store_true", default=None)
    gpu.add_argument("--no-gpu", dest="gpu", action="store_false")
    args = parser.parse_args(argv)
    try:
        with open(args.expected, encoding="utf-8") as f:
            rules = parse_rules(f.read(), args.expected)
    except (OSError, ValueError) as error:
        print(f"ci_results: {error}", file=sys.stderr)
        return 2
    facts = machine_facts()
    if args.gpu is not None:
        facts["gpu"] = args.gpu
    results = collect(_steps(args.ctest, "--ctest"), _steps(args.pytest, "--pytest"))
    summary = classify(results, rules, facts)
    for line in report(summary, args.expected, args.stage, args.slowest, results):
        print(line)
    return 1 if summary.failed_count else 0


if __name__ == "__main__":
    sys.exit(main())
