"""scripts/ci_results.py: CI's count of passed, failed and skipped tests from ctest's and
pytest's JUnit reports, and the check of each skip against .ci/expected-skips.txt. Fed
made-up reports shaped like those ctest 3.25 and pytest write."""

import importlib.util
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "ci_results.py"
RULES_FILE = REPO / ".ci" / "expected-skips.txt"

if not SCRIPT.exists():
    pytest.skip("runs from a repository checkout", allow_module_level=True)
_spec = importlib.util.spec_from_file_location("ci_results", SCRIPT)
ci = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ci)

# ctest --output-junit: a gtest pass, a GTEST_SKIP (SKIP_REGULAR_EXPRESSION of
# gtest_discover_tests), a failure, a SKIP_RETURN_CODE skip, an executable not found
# (ctest counts it as failed), a disabled test, the pytest suite as one ctest.
CTEST_XML = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="7" failures="1" disabled="1" skipped="3" hostname="" time="3">
  <testcase name="RingTest.Wraps" classname="RingTest.Wraps" time="0.01" status="run">
    <system-out>[ RUN      ] RingTest.Wraps
[       OK ] RingTest.Wraps (0 ms)
</system-out>
  </testcase>
  <testcase name="GpuCudaTest.Times" classname="GpuCudaTest.Times" time="0.02" status="notrun">
    <skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
    <system-out>[ RUN      ] GpuCudaTest.Times
/repo/tests/timing/gpu_cuda_test.cpp:40: Skipped
no GPU: CUDA driver
  not found

[  SKIPPED ] GpuCudaTest.Times (0 ms)
[  SKIPPED ] 1 test, listed below:
[  SKIPPED ] GpuCudaTest.Times
</system-out>
  </testcase>
  <testcase name="CsvTest.Quotes" classname="CsvTest.Quotes" time="2.5" status="fail">
    <failure message=""/>
    <system-out>/repo/tests/common/csv_test.cpp:9: Failure
[  FAILED  ] CsvTest.Quotes (0 ms)
</system-out>
  </testcase>
  <testcase name="example_python_train" classname="example_python_train" time="0.3" status="notrun">
    <skipped message="SKIP_RETURN_CODE=77"/>
    <system-out>python_train.py: this python has no torch
</system-out>
  </testcase>
  <testcase name="gone" classname="gone" time="0" status="notrun">
    <skipped message="Unable to find executable"/>
    <system-out>Unable to find executable: /build/tests/gone</system-out>
  </testcase>
  <testcase name="old_check" classname="old_check" time="0" status="disabled">
    <system-out>Disabled</system-out>
  </testcase>
  <testcase name="python_tests" classname="python_tests" time="500" status="run">
    <system-out>1 passed, 3 skipped</system-out>
  </testcase>
</testsuite>
"""

# pytest --junitxml -o junit_family=xunit1: a pass, a skip mark, a pytest.skip() in a
# class with a parametrized id, an xfail, a failure, a fixture error.
PYTEST_XML = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">
<testsuite name="pytest" errors="1" failures="1" skipped="4" tests="7" time="9.0">
<testcase classname="tests.python.test_top" name="test_once" file="tests/python/test_top.py"
  line="3" time="1.5" />
<testcase classname="tests.python.test_top" name="test_in_tmux" file="tests/python/test_top.py"
  line="9" time="0.0"><skipped type="pytest.skip" message="tmux is not installed (scripts/setup.sh)">
  tests/python/test_top.py:9: tmux is not installed (scripts/setup.sh)</skipped></testcase>
<testcase classname="tests.python.test_torch.TestCuda" name="test_event[a b]"
  file="tests/python/test_torch.py" line="37" time="0.0"><skipped type="pytest.skip"
  message="needs torch with CUDA and a CUDA build of trainscope">...</skipped></testcase>
<testcase classname="tests.python.test_run" name="test_known_bug" file="tests/python/test_run.py"
  line="5" time="0.1"><skipped type="pytest.xfail" message="issue 12" /></testcase>
<testcase classname="tests.python.test_run" name="test_fails" file="tests/python/test_run.py"
  line="8" time="7.0"><failure message="assert 1 == 2">E assert 1 == 2</failure></testcase>
<testcase classname="tests.python.test_run" name="test_setup" file="tests/python/test_run.py"
  line="12" time="0.0"><error message="failed on setup with &quot;OSError&quot;">E</error>
</testcase>
</testsuite></testsuites>
"""

RULES = """
# comment lines and blank lines are ignored
nogpu | *: GpuCudaTest.* | no GPU: *        # the CUDA tests need a GPU
nogpu | python: tests/python/test_torch.py::* | needs torch with CUDA*  # torch.cuda tests
root  | *: StatsFormat.* | root ignores *    # root reads any directory
gpu   | *: NoGpu.* | a GPU is visible       # only where a GPU is
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_ctest_report_outcomes_and_gtest_skip_reason(tmp_path):
    results = {r.test: r for r in ci.read_ctest_junit(_write(tmp_path, "c.xml", CTEST_XML), "asan")}
    assert {t: r.outcome for t, r in results.items()} == {
        "RingTest.Wraps": "passed", "GpuCudaTest.Times": "skipped", "CsvTest.Quotes": "failed",
        "example_python_train": "skipped", "gone": "failed", "old_check": "skipped",
        "python_tests": "passed"}
    # The GTEST_SKIP() message (all its lines), not ctest's "SKIP_REGULAR_EXPRESSION_MATCHED".
    assert results["GpuCudaTest.Times"].reason == "no GPU: CUDA driver not found"
    # A SKIP_RETURN_CODE test: the last line it printed.
    assert results["example_python_train"].reason == "python_train.py: this python has no torch"
    assert results["gone"].reason == "Unable to find executable"
    assert "disabled" in results["old_check"].reason
    assert results["CsvTest.Quotes"].seconds == 2.5
    assert results["GpuCudaTest.Times"].name == "asan: GpuCudaTest.Times"


def test_pytest_report_ids_outcomes_and_reasons(tmp_path):
    results = {r.test: r for r in ci.read_pytest_junit(_write(tmp_path, "p.xml", PYTEST_XML),
                                                       "python")}
    assert {t: r.outcome for t, r in results.items()} == {
        "tests/python/test_top.py::test_once": "passed",
        "tests/python/test_top.py::test_in_tmux": "skipped",
        "tests/python/test_torch.py::TestCuda::test_event[a b]": "skipped",
        "tests/python/test_run.py::test_known_bug": "skipped",
        "tests/python/test_run.py::test_fails": "failed",
        "tests/python/test_run.py::test_setup": "failed"}
    assert results["tests/python/test_top.py::test_in_tmux"].reason == \
        "tmux is not installed (scripts/setup.sh)"
    assert results["tests/python/test_run.py::test_known_bug"].reason == "xfail: issue 12"
    assert results["tests/python/test_run.py::test_fails"].reason == "assert 1 == 2"


def test_gtest_skip_reason_without_a_message_line():
    output = "[ RUN      ] A.B\n/x.cpp:3: Skipped\n\n[  SKIPPED ] A.B (0 ms)\n"
    assert ci.gtest_skip_reason(output, "A.B") == ""
    assert ci.gtest_skip_reason(output, "A.C") == ""


def test_the_pytest_suite_replaces_its_ctest(tmp_path):
    ctest = _write(tmp_path, "c.xml", CTEST_XML)
    pytest_xml = _write(tmp_path, "p.xml", PYTEST_XML)
    results = ci.collect({"release": ctest}, {"release": pytest_xml})
    tests = [r.test for r in results]
    assert "python_tests" not in tests
    assert "tests/python/test_top.py::test_once" in tests and "RingTest.Wraps" in tests
    assert len(results) == 6 + 6


def test_a_failed_pytest_ctest_with_no_failed_test_is_a_failure(tmp_path):
    ctest = _write(tmp_path, "c.xml", CTEST_XML.replace(
        '"python_tests" time="500" status="run">',
        '"python_tests" time="1200" status="fail"><failure message=""/>'))
    passing = _write(tmp_path, "p.xml", '<testsuites><testsuite><testcase classname="m" name="t" '
                                        'file="m.py" time="1"/></testsuite></testsuites>')
    results = ci.collect({"python": ctest}, {"python": passing})
    failed = [r for r in results if r.test == "python_tests"]
    assert [r.outcome for r in failed] == ["failed"]
    assert "timeout or crash" in failed[0].reason


def test_a_pytest_suite_stopped_before_its_report_is_its_ctests_failure(tmp_path):
    ctest = _write(tmp_path, "c.xml", CTEST_XML.replace(
        '"python_tests" time="500" status="run">',
        '"python_tests" time="1200" status="fail"><failure message=""/>'))
    results = ci.collect({"python": ctest}, {"python": str(tmp_path / "none.xml")})
    failed = [r for r in results if r.outcome == "failed"]
    assert [r.test for r in failed] == ["CsvTest.Quotes", "gone", "python_tests"]
    assert failed[-1].reason.startswith("no report at ")
    assert "did not finish" in failed[-1].reason
    # A passing python_tests with no report: the report itself is missing (a broken setup).
    passing = ci.collect({"python": _write(tmp_path, "c2.xml", CTEST_XML)},
                         {"python": str(tmp_path / "none.xml")})
    assert [(r.test, r.outcome) for r in passing if r.test.startswith("(")] == [
        ("(pytest report)", "failed")]


def test_missing_or_broken_or_empty_reports_fail_their_step(tmp_path):
    empty = _write(tmp_path, "empty.xml", '<testsuite name="(empty)" tests="0"></testsuite>')
    broken = _write(tmp_path, "broken.xml", "<testsuite><testcase")
    results = ci.collect({"asan": str(tmp_path / "none.xml"), "tsan": empty, "fuzz": broken},
                         {"python": str(tmp_path / "none.xml")})
    assert [(r.step, r.outcome) for r in results] == [
        ("asan", "failed"), ("tsan", "failed"), ("fuzz", "failed"), ("python", "failed")]
    assert "no report at" in results[0].reason
    assert results[1].reason == "the step ran no tests"


def test_rules_parse_with_their_line_and_comment():
    rules = ci.parse_rules(RULES)
    assert [(r.line, r.when, r.test) for r in rules] == [
        (3, ("nogpu",), "*: GpuCudaTest.*"),
        (4, ("nogpu",), "python: tests/python/test_torch.py::*"),
        (5, ("root",), "*: StatsFormat.*"), (6, ("gpu",), "*: NoGpu.*")]
    assert rules[0].why == "the CUDA tests need a GPU"


@pytest.mark.parametrize("line, message", [
    ("nogpu | *: A.* | *", "no comment"),
    ("nogpu | *: A.* | *  #   ", "no comment"),
    ("nogpu | *: A.*  # why", "WHEN | TEST | REASON"),
    ("nogpu | | x  # why", "WHEN | TEST | REASON"),
    ("nogpus | *: A.* | x  # why", "unknown condition 'nogpus'"),
    ("nogpu,sometimes | *: A.* | x  # why", "unknown condition 'sometimes'"),
])
def test_a_bad_rule_is_an_error_naming_its_line(line, message):
    with pytest.raises(ValueError, match=r"^rules:2: .*" + message.replace("|", r"\|")):
        ci.parse_rules("# header\n" + line, "rules")


def test_only_rules_whose_conditions_hold_expect_a_skip(tmp_path):
    results = ci.collect({"release": _write(tmp_path, "c.xml", CTEST_XML)},
                         {"release": _write(tmp_path, "p.xml", PYTEST_XML)})
    rules = ci.parse_rules(RULES)
    # Wrong step: the torch rule names step "python", these ran in "release".
    summary = ci.classify(results, rules, {"gpu": False, "root": True})
    assert [r.test for r, _ in summary.expected] == ["GpuCudaTest.Times"]
    assert sorted(r.test for r in summary.unexpected) == [
        "example_python_train", "old_check", "tests/python/test_run.py::test_known_bug",
        "tests/python/test_top.py::test_in_tmux",
        "tests/python/test_torch.py::TestCuda::test_event[a b]"]
    assert [r.test for r in summary.failed] == [
        "CsvTest.Quotes", "gone", "tests/python/test_run.py::test_fails",
        "tests/python/test_run.py::test_setup"]
    assert len(summary.passed) == 2
    assert summary.failed_count == 4 + 5
    # Rules that hold here but matched nothing are named (a test renamed, a skip gone).
    assert [r.line for r in summary.unused] == [4, 5]
    # On a GPU machine the "no GPU" skip is not expected.
    on_gpu = ci.classify(results, rules, {"gpu": True, "root": True})
    assert "GpuCudaTest.Times" in [r.test for r in on_gpu.unexpected]
    assert [r.line for r in on_gpu.unused] == [5, 6]


@pytest.mark.parametrize("when, gpu, root, applies", [
    ("any", False, False, True), ("gpu", True, False, True), ("gpu", False, True, False),
    ("nogpu", False, False, True), ("nogpu", True, False, False), ("root", False, True, True),
    ("root", True, False, False), ("nonroot", False, False, True), ("nonroot", True, True, False),
    ("nogpu,root", False, True, True), ("nogpu,root", False, False, False)])
def test_conditions(when, gpu, root, applies):
    rule = ci.parse_rules(f"{when} | *: A.B | x  # why")[0]
    assert rule.applies({"gpu": gpu, "root": root}) is applies


def test_star_is_the_only_wildcard():
    rule = ci.parse_rules("any | python: t.py::test_p[1] | reason (a.b)?  # brackets are text")[0]
    skipped = ci.Result("python", "t.py::test_p[1]", "skipped", "reason   (a.b)?")
    assert rule.matches(skipped)
    assert not rule.matches(ci.Result("python", "t.py::test_p1", "skipped", "reason (a.b)?"))
    assert not rule.matches(ci.Result("python", "t.py::test_p[1]", "skipped", "reason (axb)?"))


def test_main_prints_skips_failures_stage_times_and_the_count(tmp_path, capsys):
    rules = _write(tmp_path, "rules.txt", RULES)
    ctest = _write(tmp_path, "c.xml", CTEST_XML)
    pytest_xml = _write(tmp_path, "p.xml", PYTEST_XML)
    status = ci.main(["--expected", rules, "--no-gpu", "--ctest", f"python={ctest}",
                      "--pytest", f"python={pytest_xml}", "--stage", "release=812/900",
                      "--stage", "python=503/450"])
    lines = capsys.readouterr().out.splitlines()
    assert status == 1
    assert lines[-1] == "ci: 2 passed, 8 failed, 2 skipped"
    assert lines[-2] == ("ci: stage times: release 812 s (budget 900 s), "
                         "python 503 s (budget 450 s, OVER)")
    assert "ci: skipped: python: GpuCudaTest.Times: no GPU: CUDA driver not found" in lines
    assert ("ci: skipped: python: tests/python/test_torch.py::TestCuda::test_event[a b]: "
            "needs torch with CUDA and a CUDA build of trainscope") in lines
    assert ("ci: unexpected skip: python: tests/python/test_top.py::test_in_tmux: tmux is not "
            f"installed (scripts/setup.sh) (no rule of {rules} expects it here)") in lines
    assert "ci: failed: python: gone (Unable to find executable)" in lines
    assert "ci: failed: python: CsvTest.Quotes" in lines


def test_main_passes_when_every_skip_is_expected(tmp_path, capsys):
    rules = _write(tmp_path, "rules.txt", RULES)
    ctest = _write(tmp_path, "c.xml", '<testsuite><testcase name="A.B" status="run" time="1"/>'
                   + CTEST_XML.split("</testcase>")[1] + "</testcase></testsuite>")
    assert ci.main(["--expected", rules, "--no-gpu", "--ctest", f"asan={ctest}"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "ci: 1 passed, 0 failed, 1 skipped"


def test_main_refuses_a_bad_rules_file(tmp_path, capsys):
    rules = _write(tmp_path, "rules.txt", "nogpu | *: A | x\n")
    assert ci.main(["--expected", rules, "--ctest", f"a={rules}"]) == 2
    assert f"{rules}:1: the rule has no comment" in capsys.readouterr().err


def test_the_repository_rules_parse():
    rules = ci.parse_rules(RULES_FILE.read_text(encoding="utf-8"), str(RULES_FILE))
    assert rules, f"{RULES_FILE} has no rule"
