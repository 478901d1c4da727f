"""`trainscope report` and trainscope.report(): the page opened in a real headless Chromium
(Debian's `chromium`, no network): no console message, every chart drawn, the table's numbers
equal to what read_run gives. Screenshots go to TRAINSCOPE_REPORT_SCREENSHOTS when it is set."""

import html.parser
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import trainscope
from run_files import INPUT_BOUND_JOB, trainscope_cli, write_run

np = pytest.importorskip("numpy")


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no headless Chromium (Debian: apt-get install chromium; scripts/setup.sh does)")


def browse(page, tmp_path, screenshot=None, height=2400):
    """Opens `page` in headless Chromium with every network request refused; returns the DOM
    after the scripts ran and the console messages (each a line of Chromium's log)."""
    args = [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--disable-extensions", f"--user-data-dir={tmp_path / 'chromium'}",
            "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr", "--v=0", "--virtual-time-budget=20000",
            f"--window-size=1280,{height}"]
    url = "file://" + os.path.abspath(page)
    dom = subprocess.run(args + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    if screenshot:
        shot = subprocess.run(args + [f"--screenshot={screenshot}", url], capture_output=True,
                              text=True, timeout=120)
        console += [line for line in shot.stderr.splitlines() if ":CONSOLE" in line]
        assert os.path.getsize(screenshot) > 10000, shot.stderr[-2000:]
    return dom.stdout, console


def screenshot_path(tmp_path, name):
    folder = os.environ.get("TRAINSCOPE_REPORT_SCREENSHOTS")
    if folder:
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, name)
    return str(tmp_path / name)


def page_data(path):
    """The JSON the page draws from (its <script id="trainscope-data">)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r'<script type="application/json" id="trainscope-data">(.*?)</script>', text,
                  re.S)
    assert m, "no data block in the page"
    return json.loads(m.group(1)), text


class Dom(html.parser.HTMLParser):
    """What the tests read back from the rendered DOM: canvases, table cells, ids, body attrs."""

    def __init__(self, text):
        super().__init__()
        self.canvases = []
        self.body = {}
        self.ids = set()
        self.cells = []  # (table class, row attrs, cell attrs, text)
        self.badges = []
        self.values = {}  # id or data-field -> data-value, outside tables (the stall figures)
        self._table = None
        self._row = None
        self._cell = None
        self._badge = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag != "td" and "data-value" in a and ("id" in a or "data-field" in a):
            self.values[a.get("id") or a["data-field"]] = float(a["data-value"])
        if tag == "body":
            self.body = a
        elif tag == "canvas":
            self.canvases.append(a)
        elif tag == "table":
            self._table = a.get("class", "")
        elif tag == "tr":
            self._row = a
        elif tag == "td":
            self._cell = [self._table, self._row, a, ""]
        elif tag == "span" and "badge" in a.get("class", ""):
            self._badge = True

    def handle_endtag(self, tag):
        if tag == "td" and self._cell:
            self.cells.append(tuple(self._cell))
            self._cell = None
        elif tag == "span":
            self._badge = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[3] += data
        if self._badge:
            self.badges.append(data)


def varying_params(data):
    """The params with more than one value over the study's runs: one chart each."""
    return sum(1 for p in data["params"]
               if len({str(r.get("params", {}).get(p)) for r in data["runs"]}) > 1)


def check_rendered(dom_text, console, expected_charts):
    assert not console, "console messages:\n" + "\n".join(console)
    dom = Dom(dom_text)
    assert dom.body.get("data-ready") == "1", "the page's script did not finish"
    assert int(dom.body["data-charts"]) == expected_charts
    assert len(dom.canvases) == expected_charts
    for canvas in dom.canvases:  # Chart.js sized and drew every one
        assert "data-chart" in canvas
        assert int(canvas.get("height", "0")) > 0 and int(canvas.get("width", "0")) > 0, canvas
    return dom


def analysis_charts(analysis):
    """The charts of a stalls analysis: run times, the cold run's breakdown, and the cache and
    worker what-ifs when the analysis has them; none for a damaged stalls.json (a note)."""
    if "error" in analysis:
        return 0
    what_if = analysis["analysis"]["what_if"]
    return (2 + (1 if what_if["cache"]["points"] else 0)
            + (1 if what_if.get("workers", {}).get("predicted") else 0))


def run_charts(data):
    ranks = {(r["key"], r["device"]) for r in data["rank_stats"]}
    stalls = data.get("stalls")
    return (len(data["histograms"]) + len(data["series"]) + len(data["hardware"]) + len(ranks)
            + (2 if data["stragglers"] else 0)
            + sum(1 for m in data["metrics"] if any(len(d["x"]) > 1 for d in m["datasets"]))
            + (2 if stalls and "error" not in stalls else 0)
            + (analysis_charts(data["stalls_analysis"]) if data.get("stalls_analysis") else 0))


def write_page(inputs, out, *extra):
    cli = trainscope_cli()
    done = subprocess.run([cli, "report", *inputs, "-o", str(out), *extra], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}" in done.stdout
    return done


def percentile(values, q):
    return float(np.percentile(values, q))  # linear interpolation, as TimeStats


# ---- a run ----------------------------------------------------------------------------------------

def test_run_page_two_ranks_gpu_and_cpu_hardware(tmp_path):
    run_dir = write_run(str(tmp_path / "run"), name="resnet-demo", params={"lr": "0.1"},
                        world_size=2, rows_per_key=3000, hardware_samples=6000)
    out = tmp_path / "run.html"
    write_page([run_dir], out)
    data, text = page_data(out)
    assert data["kind"] == "run"
    # Offline: nothing in the page is fetched (Chart.js and the data are inline).
    assert not re.search(r"<(script|img|iframe)[^>]+src=|<link[^>]+href=", text)
    dom_text, console = browse(out, tmp_path, screenshot_path(tmp_path, "report-run.png"), 5200)
    dom = check_rendered(dom_text, console, run_charts(data))
    assert "FINISHED" in dom.badges

    run = trainscope.read_run(run_dir)
    regions = run.regions
    table = {}
    for table_class, row, cell, _ in dom.cells:
        if "stats" in (table_class or "") and "data-value" in cell and "data-key" in row:
            table[(row["data-key"], cell["data-field"])] = float(cell["data-value"])
    checked = 0
    for (key, device), group in regions.groupby(["key", "device"], observed=True):
        seconds = group["duration_ns"].to_numpy() / 1e9
        expected = {"count": len(seconds), "median": percentile(seconds, 50),
                    "mean": float(np.mean(seconds)), "max": float(np.max(seconds)),
                    "p95": percentile(seconds, 95)}
        for field, value in expected.items():
            got = table[(str(key), f"{device}.{field}")]
            assert got == pytest.approx(value, rel=1e-9), (key, device, field)
            checked += 1
    assert checked == 3 * 5
    # The spikes survive downsampling: each series' envelope reaches the largest region.
    for series in data["series"]:
        group = regions[(regions["key"] == series["key"]) & (regions["device"] == series["device"])]
        assert series["rows"] == len(group)
        assert max(series["hi"]) == pytest.approx(group["duration_ns"].max() / 1e9, rel=1e-4)
    # Two ranks: per-rank statistics and the slowest rank per step.
    assert {r["rank"] for r in data["rank_stats"]} == {0, 1}
    assert data["stragglers"]["key"] == "BATCH" and data["stragglers"]["steps"] == 3000
    assert sum(data["stragglers"]["slowest_count"]) == 3000
    hardware = {c["chart"] for c in data["hardware"]}
    assert {"gpu.util_pct", "proc.cpu_pct", "cpu.util_pct", "disk.read_mb_s"} <= hardware
    for chart in data["hardware"]:  # the 500 spike of every hardware series is on the page
        assert max(max(d["y"]) for d in chart["datasets"]) == pytest.approx(500.0)


def test_process_charts_are_one_line_per_rank_and_one_point_metrics_a_table(tmp_path):
    """Issue 37: the process CPU and RSS charts split into "total" (the readings before the
    rank recorded) and "total rank 0"; a metric logged once (total_flos) got a line chart; a
    key that mixes two modules' calls did not say so."""
    run_dir = write_run(str(tmp_path / "run"), hardware_samples=600)
    host_csv = [name for name in os.listdir(run_dir) if name.startswith("host-")][0]
    start_ms = 1761000000000
    with open(os.path.join(run_dir, host_csv), "a", encoding="utf-8") as f:
        for i in range(3):  # the process tree before its rank recorded: no rank yet
            f.write(f"system/proc.cpu_pct,{10 + i},0,{start_ms - 3000 + 1000 * i},\n")
    with open(os.path.join(run_dir, "metrics-0.csv"), "a", encoding="utf-8") as f:
        f.write(f"total_flos,123456789.0,16,{start_ms + 5000},0\n")
    # A key whose rows come from two modules (--auto's tag): its row says so.
    with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as f:
        run = json.load(f)
    run["tags"] = dict(run.get("tags") or {}, **{"trainscope.auto.callers.BATCH": "G, D"})
    with open(os.path.join(run_dir, "run.json"), "w", encoding="utf-8") as f:
        json.dump(run, f)
    out = tmp_path / "run.html"
    write_page([run_dir], out)
    data, _ = page_data(out)
    proc = [c for c in data["hardware"] if c["chart"] == "proc.cpu_pct"][0]
    assert [d["label"] for d in proc["datasets"]] == ["rank 0"]
    assert proc["datasets"][0]["x"][:3] == pytest.approx([-3.0, -2.0, -1.0])
    dom_text, console = browse(out, tmp_path)
    dom = check_rendered(dom_text, console, run_charts(data))
    cells = [text for _, _, _, text in dom.cells]
    assert "total_flos" in cells and "123457000" in cells
    assert "BATCH (mixes G, D)" in cells


def test_long_run_is_downsampled_with_every_spike(tmp_path):
    run_dir = write_run(str(tmp_path / "long"), keys=(("BATCH", "CPU"),), rows_per_key=200_000,
                        hardware_samples=60_000)
    out = tmp_path / "long.html"
    write_page([run_dir], out, "--max-points", "500", "--quiet")
    data, _ = page_data(out)
    (series,) = data["series"]
    assert series["rows"] == 200_000 and len(series["x"]) == 500 and series["bucket"] == 400
    durations = trainscope.read_run(run_dir).regions["duration_ns"] / 1e9
    assert max(series["hi"]) == pytest.approx(durations.max(), rel=1e-4)
    assert min(series["lo"]) == pytest.approx(durations.min(), rel=1e-4)
    stats = data["stats"][0]
    assert stats["count"] == 200_000  # statistics use every row
    assert stats["median"] == pytest.approx(percentile(durations, 50), rel=1e-12)
    for chart in data["hardware"]:
        for d in chart["datasets"]:
            assert d["downsampled"] and len(d["x"]) <= 500


def test_empty_run(tmp_path):
    run_dir = write_run(str(tmp_path / "empty"), keys=())
    out = tmp_path / "empty.html"
    write_page([run_dir], out)
    data, _ = page_data(out)
    assert data["stats"] == [] and data["series"] == []
    dom = check_rendered(*browse(out, tmp_path), run_charts(data))
    assert "no-regions" in dom.ids


def test_crashed_run_is_shown_as_crashed(tmp_path):
    run_dir = write_run(str(tmp_path / "crashed"), state="CRASHED", hardware_samples=600)
    out = tmp_path / "crashed.html"
    write_page([run_dir], out)
    data, _ = page_data(out)
    assert data["run"]["status"] == "CRASHED" and data["run"]["crashed"]
    dom = check_rendered(*browse(out, tmp_path), run_charts(data))
    assert "CRASHED" in dom.badges and "crashed" in dom.ids and "in-progress" not in dom.ids


def test_run_in_progress_says_so(tmp_path):
    run_dir = write_run(str(tmp_path / "live"), state="RUNNING", hardware_samples=600)
    out = tmp_path / "live.html"
    write_page([run_dir], out)
    data, _ = page_data(out)
    assert data["run"]["status"] == "RUNNING" and data["run"]["in_progress"]
    dom = check_rendered(*browse(out, tmp_path), run_charts(data))
    assert "in-progress" in dom.ids and "crashed" not in dom.ids


# ---- a sweep and its scaling study ------------------------------------------------------------

TRAIN = """
import argparse, time
import trainscope
ap = argparse.ArgumentParser()
ap.add_argument("--p", type=float)
a = ap.parse_args()
tmr = trainscope.Timer()
for epoch in range(2):
    tmr.start(trainscope.TimeType.EPOCH)
    for step in range(12):
        tmr.start(trainscope.TimeType.BATCH)
        time.sleep(0.001 + 0.016 / a.p)
        tmr.end(trainscope.TimeType.BATCH)
    tmr.end(trainscope.TimeType.EPOCH)
"""


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """A real sweep of 6 runs (`trainscope sweep --grid p=...`), the time per batch ~ 1/p."""
    cli = trainscope_cli()
    root = tmp_path_factory.mktemp("sweep")
    (root / "train.py").write_text(TRAIN)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([cli, "sweep", "--grid", "p=1,2,4,8,16,32", "--slots", "2", "--dir",
                           str(root / "sweep"), "--", sys.executable, str(root / "train.py")],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return root / "sweep"


def test_sweep_page_and_scaling_study(sweep_dir, tmp_path):
    out = tmp_path / "sweep.html"
    write_page([str(sweep_dir)], out)
    data, _ = page_data(out)
    assert data["kind"] == "study" and len(data["runs"]) == 6
    assert {r["status"] for r in data["runs"]} == {"FINISHED"}
    scaling = data["scaling"]
    assert scaling["parameter"] == "p"
    models = {(m["key"], m["device"]): m for m in scaling["models"]}
    assert set(models) == {("BATCH", "CPU"), ("EPOCH", "CPU")}
    # The same model as trainscope.scaling fits to the same runs.
    from trainscope import scaling as sc
    runs = [r["dir"] for r in data["runs"]]
    measured = sc.read_runs(runs, sc.RunSelection(parameters=["p"], what="BATCH"))
    fitted = sc.fit(measured)
    (embedded,) = models[("BATCH", "CPU")]["model"]["models"]
    assert embedded["formula"] == fitted.formula()
    # The whole Model JSON document of `trainscope model --json`: costs with nrss, the terms,
    # the identifiers and the C++ expression too.
    assert embedded["cpp"] == fitted.cpp() and embedded["identifiers"] == {"p": "p"}
    assert embedded["costs"]["nrss"] == pytest.approx(fitted.costs.nrss, rel=1e-12)
    assert len(embedded["terms"]) == len(fitted.terms)

    # p was found varying, not named: no speedup, efficiency or cost (issue 26), a line saying
    # why; one chart per model.
    assert scaling["views"] is False
    expected = varying_params(data) + 2 + sum(1 for m in scaling["models"] if "error" not in m)
    dom_text, console = browse(out, tmp_path, screenshot_path(tmp_path, "report-sweep.png"), 3000)
    dom = check_rendered(dom_text, console, expected)
    # (the page's script holds both texts: the rendered elements are matched, '>' first)
    assert ">speedup and efficiency against" not in dom_text
    assert ">Speedup, efficiency and cost are drawn only against a parameter" in dom_text
    # Named with --scaling p: drawn.
    named = tmp_path / "sweep-named.html"
    write_page([str(sweep_dir)], named, "--scaling", "p")
    named_data, _ = page_data(named)
    assert named_data["scaling"]["views"] is True
    named_dom, named_console = browse(named, tmp_path, None, 3000)
    check_rendered(named_dom, named_console, varying_params(named_data) + 2 + sum(
        3 for m in named_data["scaling"]["models"] if "error" not in m))
    assert ">speedup and efficiency against p<" in named_dom
    assert ">Speedup, efficiency and cost are drawn only" not in named_dom
    rows = {}
    for table_class, row, cell, _ in dom.cells:
        if "runs" in (table_class or "") and cell.get("data-field") == "BATCH.CPU":
            rows[row["data-run"]] = float(cell["data-value"])
    assert len(rows) == 6
    for r in data["runs"]:  # the table's medians are read_run's
        regions = trainscope.read_run(r["dir"]).regions
        batch = regions[(regions["key"] == "BATCH") & (regions["device"] == "CPU")]
        assert rows[r["id"]] == pytest.approx(percentile(batch["duration_ns"] / 1e9, 50), rel=1e-9)


def test_several_runs_without_a_scaling_param(tmp_path):
    dirs = [write_run(str(tmp_path / f"r{i}"), run_id=f"{i:032x}", name=f"r{i}",
                      params={"opt": ["sgd", "adam"][i % 2], "lr": str(0.1 * (i + 1))},
                      rows_per_key=50) for i in range(3)]
    out = tmp_path / "runs.html"
    write_page(dirs, out)
    data, _ = page_data(out)
    assert len(data["runs"]) == 3 and data["scaling"]["parameter"] is None
    assert "several params vary" in data["scaling"]["why_none"]
    dom = check_rendered(*browse(out, tmp_path), varying_params(data) + 2)
    assert "no-scaling" in dom.ids


def test_a_study_against_one_param_fits_one_model_per_value_of_another(tmp_path):
    # A grid of p and lr studied against p (--scaling p): the runs at one p differ in
    # lr, so the page has a model per lr value (as `trainscope model --by lr`), not an
    # error per key and not the two lr values averaged as repetitions.
    dirs = [write_run(str(tmp_path / f"r{p}-{lr}"), run_id=f"{p:016x}{int(lr * 10):016x}",
                      name=f"p{p}-lr{lr}", params={"p": str(p), "lr": str(lr)},
                      keys=(("BATCH", "CPU"),), rows_per_key=30, seed=p, scale=p * lr)
            for p in (1, 2, 4, 8, 16) for lr in (0.1, 0.2)]
    out = tmp_path / "grid.html"
    write_page(dirs, out, "--scaling", "p")
    data, _ = page_data(out)
    models = data["scaling"]["models"]
    assert sorted(m.get("group") for m in models) == ["lr=0.1", "lr=0.2"]
    assert all("error" not in m and m["points_used"] == 5 and m["runs_used"] == 5
               for m in models), models
    # Per model: its measurements, speedup and efficiency, and cost (p was named).
    dom_text, console = browse(out, tmp_path)
    check_rendered(dom_text, console, varying_params(data) + 2 + 3 * len(models))
    assert ">BATCH [lr=0.1] · CPU<" in dom_text and ">BATCH [lr=0.2] · CPU<" in dom_text


# ---- data stalls ----------------------------------------------------------------------------------

HERE = os.path.dirname(os.path.abspath(__file__))
STALLS_TRAIN = os.path.join(HERE, "stalls_train.py")


def _stalls_env():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("TRAINSCOPE_RUN_DIR", None)
    return env


@pytest.fixture(scope="module")
def stalls_dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("stalls-data")
    for i in range(96):
        (root / f"s{i:04d}.bin").write_bytes(os.urandom(8 * 1024))
    return root


PASS_NUMBERS = ("data_wait_share", "batches", "wait_s", "wall_s", "wait_p50_s", "wait_p95_s",
                "wait_max_s", "startup_wait_share")


def same_figures(shown, printed):
    """Every figure the page has of each pass equals what `trainscope stalls --json` printed
    (which may print more), and the page has all of PASS_NUMBERS."""
    assert len(shown) == len(printed)
    for page, cli in zip(shown, printed):
        assert set(PASS_NUMBERS) | {"pass", "input_bound", "bunched"} <= set(page)
        assert page == {k: cli[k] for k in page}, (page, cli)
    return True


def test_run_page_shows_the_data_stalls_of_a_timed_loader(stalls_dataset, tmp_path):
    """A run whose loop is a real `for batch in tmr.timed(loader):` over a torch DataLoader with
    a worker: the page's stall section shows what `trainscope stalls RUN --json` prints."""
    pytest.importorskip("torch")
    cli = trainscope_cli()
    run_dir = tmp_path / "run"
    done = subprocess.run([cli, "run", "--run-dir", str(run_dir), "--interval", "0.25", "--",
                           sys.executable, STALLS_TRAIN, "--data", str(stalls_dataset),
                           "--epochs", "3", "--num_workers", "1", "--batch", "8"],
                          capture_output=True, text=True, timeout=300, env=_stalls_env())
    assert done.returncode == 0, done.stderr[-2000:]
    expected = json.loads(subprocess.run([cli, "stalls", str(run_dir), "--json"],
                                         capture_output=True, text=True, timeout=60,
                                         check=True).stdout)
    out = tmp_path / "stalls.html"
    write_page([str(run_dir)], out)
    data, _ = page_data(out)
    stalls = data["stalls"]
    # The same analysis (analyze_run), so the same figures, to the last bit.
    assert same_figures(stalls["passes"], expected["passes"])
    assert same_figures([stalls["run"]], [expected["run"]])
    assert stalls["pattern"] == expected["pattern"]
    assert stalls["batch_size"] == expected["batch_size"] == 8
    assert [p["pass"] for p in stalls["passes"]] == [1, 2, 3]
    assert stalls["run"]["input_bound"] == "highly"  # 8 decodes of 4 ms per 10 ms step
    waits = trainscope.read_run(str(run_dir)).regions
    waits = waits[waits["key"] == "IO"]["duration_ns"] / 1e9
    assert stalls["waits"]["rows"] == len(waits) == expected["run"]["batches"]
    assert max(stalls["waits"]["hi"]) == pytest.approx(waits.max(), rel=1e-4)
    assert len(stalls["pass_starts_s"]) == 3

    dom_text, console = browse(out, tmp_path, screenshot_path(tmp_path, "report-stalls.png"),
                               5200)
    dom = check_rendered(dom_text, console, run_charts(data))
    assert "stalls" in dom.ids and "stalls-error" not in dom.ids
    assert dom.values["stalls-share"] == pytest.approx(expected["run"]["data_wait_share"],
                                                        rel=1e-12)
    shown = {}
    for table_class, row, cell, text in dom.cells:
        if table_class == "data stalls-passes" and "data-field" in cell:
            shown[(row["data-pass"], cell["data-field"])] = (cell.get("data-value"), text)
    for name, figures in [(str(p["pass"]), p) for p in expected["passes"]] + [
            ("run", expected["run"])]:
        for field in PASS_NUMBERS:
            assert float(shown[(name, field)][0]) == pytest.approx(figures[field], rel=1e-12), \
                (name, field)
        assert shown[(name, "input_bound")][1] == figures["input_bound"]
        assert shown[(name, "bunched")][1] == ("yes" if figures["bunched"] else "no")


def test_a_stalls_analysis_directory_is_reported_with_its_differential_breakdown(
        stalls_dataset, tmp_path):
    """A real `trainscope stalls --dataset ... -- python stalls_train.py` (a few iterations, one
    varied worker count), reported as a study page with the analysis, and one of its runs alone
    as a run page with its live stalls and the analysis it belongs to."""
    pytest.importorskip("torch")
    cli = trainscope_cli()
    analysis = tmp_path / "analysis"
    done = subprocess.run([cli, "stalls", "--dataset", str(stalls_dataset), "--iterations", "8",
                           "--warmup", "2", "--vary", "num_workers=1", "--dir", str(analysis),
                           "--json", "--", sys.executable, STALLS_TRAIN, "--data",
                           str(stalls_dataset), "--num_workers", "0", "--batch", "8"],
                          capture_output=True, text=True, timeout=600, env=_stalls_env(),
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    stored = json.loads((analysis / "stalls.json").read_text())

    out = tmp_path / "analysis.html"
    write_page([str(analysis)], out)
    data, _ = page_data(out)
    assert data["kind"] == "study" and data["title"] == f"data stalls {analysis}"
    names = [r["name"] for r in data["runs"]]  # as they ran (and any further runs after)
    assert names[:4] == ["synthetic", "cold", "warm", "warm-num_workers-1"], names
    (shown,) = data["stalls_analyses"]
    assert "error" not in shown and shown["analysis"] == stored
    expected = (varying_params(data) + 2
                + sum(3 for m in data["scaling"]["models"] if "error" not in m)
                + analysis_charts(shown))
    dom_text, console = browse(out, tmp_path,
                               screenshot_path(tmp_path, "report-stalls-analysis.png"), 3600)
    dom = check_rendered(dom_text, console, expected)
    assert "stalls-analysis" in dom.ids
    diff = stored["differential"]
    for field in ("prep_share", "prep_share_ci", "fetch_share", "fetch_share_ci",
                  "ingestion_rate", "prep_rate", "live_wait_share_cold"):
        assert dom.values[field] == pytest.approx(diff[field], rel=1e-12), field
    for leg in ("synthetic", "cold", "warm"):
        assert dom.values[f"{leg}.time_s"] == pytest.approx(stored["runs"][leg]["time_s"],
                                                             rel=1e-12)
    legs = {}
    for table_class, row, cell, _ in dom.cells:
        if table_class == "data stalls-legs" and cell.get("data-field") == "time_s":
            legs[row["data-leg"]] = float(cell["data-value"])
    assert legs == pytest.approx({k: v["time_s"] for k, v in stored["runs"].items()}, rel=1e-12)

    cold = tmp_path / "cold.html"
    write_page([str(analysis / "runs" / "cold")], cold)
    data, _ = page_data(cold)
    assert data["stalls_analysis"]["leg"] == "cold"
    assert data["stalls_analysis"]["analysis"] == stored
    assert same_figures(data["stalls"]["passes"], stored["runs"]["cold"]["analysis"]["passes"])
    dom = check_rendered(*browse(cold, tmp_path), run_charts(data))
    assert "stalls" in dom.ids


def test_a_damaged_stalls_json_is_a_note_on_a_written_page(tmp_path):
    run_dir = write_run(str(tmp_path / "analysis" / "runs" / "cold"), name="cold",
                        rows_per_key=50)
    (tmp_path / "analysis" / "stalls.json").write_text('{"runs": {"cold": ')
    out = tmp_path / "damaged.html"
    write_page([str(tmp_path / "analysis")], out)
    data, _ = page_data(out)
    (shown,) = data["stalls_analyses"]
    assert shown["error"].startswith(f"{tmp_path / 'analysis' / 'stalls.json'}: not valid JSON")
    assert [r["dir"] for r in data["runs"]] == [run_dir]
    dom_text, console = browse(out, tmp_path)
    dom = check_rendered(dom_text, console, varying_params(data) + 2)
    assert "stalls-analysis" in dom.ids and "stalls.json: not valid JSON" in dom_text


# ---- errors and the Python API --------------------------------------------------------------------

def test_errors_name_the_input(tmp_path):
    cli = trainscope_cli()
    missing = tmp_path / "nope"
    done = subprocess.run([cli, "report", str(missing), "-o", str(tmp_path / "x.html")],
                          capture_output=True, text=True)
    assert done.returncode == 1 and f"{missing}: no such file or directory" in done.stderr
    (tmp_path / "plain").mkdir()
    done = subprocess.run([cli, "report", str(tmp_path / "plain"), "-o", str(tmp_path / "x.html")],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "not a trainscope run (no run.json)" in done.stderr
    # Without -o the page would be ./<name>.html: the input is still checked first.
    (tmp_path / "cwd").mkdir()
    done = subprocess.run([cli, "report", str(tmp_path / "plain")], capture_output=True, text=True,
                          cwd=tmp_path / "cwd")
    assert done.returncode == 1 and "not a trainscope run (no run.json)" in done.stderr
    assert os.listdir(tmp_path / "cwd") == []
    bad = write_run(str(tmp_path / "bad"), rows_per_key=5)
    with open(os.path.join(bad, "regions-0.csv"), "a", encoding="utf-8") as f:
        f.write("BATCH,TPU,0,0,1,1,0,0\n")
    done = subprocess.run([cli, "report", bad, "-o", str(tmp_path / "x.html")],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "regions-0.csv:17: device" in done.stderr
    assert not (tmp_path / "x.html").exists()


def test_python_report_writes_the_page_and_shows_inline(tmp_path):
    run_dir = write_run(str(tmp_path / "run"), name="py", rows_per_key=100)
    page = trainscope.report(trainscope.read_run(run_dir), output=tmp_path / "py.html",
                             title="from Python")
    assert page.path == str(tmp_path / "py.html") and os.fspath(page) == page.path
    with open(page.path, encoding="utf-8") as f:
        assert f.read() == page.html
    assert "<title>from Python</title>" in page.html
    inline = page._repr_html_()
    assert inline.startswith("<iframe srcdoc=") and "&lt;title&gt;from Python" in inline
    in_memory = trainscope.report([run_dir])
    assert in_memory.path is None and "trainscope-data" in in_memory.html
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        trainscope.report(str(tmp_path / "missing"))


def test_python_report_replaces_the_page_atomically_through_the_cpp_writer(tmp_path):
    run_dir = write_run(str(tmp_path / "run"), name="py", rows_per_key=20)
    out = tmp_path / "pages" / "run.html"
    # A missing directory: the error names the output; nothing is created.
    with pytest.raises(FileNotFoundError, match="pages/run.html"):
        trainscope.report(run_dir, output=out)
    assert not (tmp_path / "pages").exists()
    out.parent.mkdir()
    out.write_text("old page", encoding="utf-8")
    first = trainscope.report(run_dir, output=out, title="first")
    assert out.read_text(encoding="utf-8") == first.html and "<title>first</title>" in first.html
    # A failed report leaves the page as it was; no temporary file is left behind.
    with pytest.raises(FileNotFoundError):
        trainscope.report(str(tmp_path / "missing"), output=out)
    assert out.read_text(encoding="utf-8") == first.html
    assert sorted(p.name for p in out.parent.iterdir()) == ["run.html"]
    with pytest.raises(TypeError, match=r"output must be a str or os.PathLike\[str\], not bytes"):
        trainscope._core._write_report_page(b"<html></html>", bytes(out))
    assert out.read_text(encoding="utf-8") == first.html


# ---- the diagnosis at the top of a run page -------------------------------------------------------

def _label_text(label):
    """A label as the headline names it: "STRAGGLER(compute, rank 1)"."""
    parts = [label["kind"]] if label["kind"] else []
    if label.get("rank") is not None:
        parts.append(f"rank {label['rank']}")
    if label.get("host"):
        parts.append(label["host"])
    return label["name"] + (f"({', '.join(parts)})" if parts else "")


def test_run_page_opens_with_the_diagnosis_of_trainscope_diagnose(tmp_path):
    """An input-bound job run by `trainscope run`: the page's first section is its diagnosis, the
    document `trainscope diagnose RUN --json` prints, drawn as labels and the phase table."""
    cli = trainscope_cli()
    run_dir = tmp_path / "run"
    env = dict(os.environ)
    env.pop("TRAINSCOPE_RUN_DIR", None)
    done = subprocess.run([cli, "run", "--run-dir", str(run_dir), "--no-sample", "--quiet", "--",
                           sys.executable, "-c", INPUT_BOUND_JOB],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    expected = json.loads(subprocess.run([cli, "diagnose", str(run_dir), "--json"],
                                         capture_output=True, text=True, timeout=60,
                                         check=True).stdout)
    out = tmp_path / "diagnosis.html"
    write_page([str(run_dir)], out)
    data, _ = page_data(out)
    assert data["diagnosis"] == expected  # the room's one writer, no second schema
    assert expected["headline"].startswith("INPUT-BOUND")

    dom_text, console = browse(out, tmp_path, screenshot_path(tmp_path, "report-diagnosis.png"),
                               1600)
    dom = check_rendered(dom_text, console, run_charts(data))
    assert "diagnosis" in dom.ids and "diagnosis-error" not in dom.ids
    # At the top: before the run's overview and its statistics.
    assert dom_text.index('id="diagnosis"') < dom_text.index('id="overview"')
    labels = [_label_text(label) for label in expected["run"]["labels"]]
    assert labels[0] == "INPUT-BOUND"
    assert ", ".join(labels) == expected["headline"]
    assert dom.badges[1:1 + len(labels)] == labels  # after the status badge, in order
    for label in expected["run"]["labels"]:
        assert label["evidence"] in dom_text and label["next_step"] in dom_text
    shown = {}
    for table_class, row, cell, _text in dom.cells:
        if table_class == "data diag-phases" and "data-value" in cell:
            shown[(row["data-phase"], row["data-device"], cell["data-field"])] = float(
                cell["data-value"])
    for scope in ("window", "run"):
        for phase in expected[scope]["phases"]:
            for field in ("median_s", "p95_s", "share", "worst_rank_s", "skew"):
                if phase[field] is None:
                    continue
                key = (phase["phase"], phase["device"], f"{scope}.{field}")
                assert shown[key] == pytest.approx(phase[field], rel=1e-12), key
    data_wait = [p for p in expected["run"]["phases"] if p["phase"] == "data_wait"]
    assert data_wait and 0.5 < data_wait[0]["share"] < 0.85


def test_the_diagnosis_links_each_anomaly_capture_at_its_step(tmp_path):
    """A run with one slow step (tests/python/hang_jobs/anomaly.py, issue 40): the page links
    its capture (captures/capture-r0-s40.json) beside the diagnosis."""
    pytest.importorskip("torch")
    job = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hang_jobs", "anomaly.py")
    env = dict(os.environ)
    env.pop("TRAINSCOPE_RUN_DIR", None)
    done = subprocess.run([sys.executable, job, "--root", str(tmp_path / "runs")],
                          capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = os.path.dirname(os.path.dirname(json.loads(done.stdout.splitlines()[-1])[0]))
    out = tmp_path / "captures.html"
    write_page([run_dir], out)
    data, _ = page_data(out)
    assert data["diagnosis"]["captures"] == [
        {"rank": 0, "step": 40, "path": "captures/capture-r0-s40.json"}]
    dom_text, console = browse(out, tmp_path)
    check_rendered(dom_text, console, run_charts(data))
    assert 'class="diag-capture" data-rank="0" data-step="40"' in dom_text, dom_text[:2000]
    assert f'href="{run_dir}/captures/capture-r0-s40.json"' in dom_text


def test_a_run_without_steps_says_why_it_has_no_diagnosis(tmp_path):
    run_dir = write_run(str(tmp_path / "run"), keys=(("data", "CPU"),), rows_per_key=50)
    out = tmp_path / "nodata.html"
    write_page([run_dir], out)
    data, _ = page_data(out)
    assert data["diagnosis"]["headline"] == "NO-DATA"
    dom_text, console = browse(out, tmp_path)
    dom = check_rendered(dom_text, console, run_charts(data))
    assert "NO-DATA" in dom.badges
    for note in data["diagnosis"]["run"]["notes"]:
        assert note in dom_text


# ---- the comparison page (trainscope report A B --compare) ----------------------------------------

COMPARE_KEYS = (("BATCH", "CPU"), ("FORWARD", "CPU"))


def compare_charts(data):
    """Per pair: the step series of A and B (when drawn) and the forest chart of the ratios."""
    return sum((1 if chart else 0) + 1 for chart in data["charts"])


def compare_cells(dom, pair=None):
    """The comparison table's cells: {(row name, data-field): (data-value or None, text)}."""
    out = {}
    for table_class, row, cell, text in dom.cells:
        if "cmp-rows" in (table_class or "") and "data-field" in cell:
            value = float(cell["data-value"]) if "data-value" in cell else None
            out.setdefault((row["data-row"], cell["data-field"]), []).append((value, text))
    return out


def test_comparison_page_of_two_runs(tmp_path):
    a = write_run(str(tmp_path / "base-dir"), keys=COMPARE_KEYS, rows_per_key=3000, seed=1,
                  name="base")
    b = write_run(str(tmp_path / "new-dir"), keys=COMPARE_KEYS, rows_per_key=3000, seed=3,
                  scale=1.25, name="new")
    out = tmp_path / "compare.html"
    write_page([a, b, "--compare"], out, "--max-points", "500")
    data, text = page_data(out)
    # Titled by the runs' names (issue 37: by their directories, the run ids).
    assert data["kind"] == "compare" and data["title"] == "new vs base"
    assert "<title>new vs base</title>" in text
    assert not re.search(r"<(script|img|iframe)[^>]+src=|<link[^>]+href=", text)
    # The document of `trainscope compare --json`, the same numbers as trainscope.compare.
    printed = json.loads(subprocess.run([trainscope_cli(), "compare", a, b, "--json"],
                                        capture_output=True, text=True, timeout=120,
                                        check=True).stdout)
    assert data["comparison"] == printed
    (pair,) = data["comparison"]["pairs"]
    assert pair["overall"]["verdict"] == "slower"
    (chart,) = data["charts"]
    assert chart["name"] == "BATCH" and chart["overall"]
    for side in ("a", "b"):
        assert chart[side]["rows"] == 3000 and len(chart[side]["x"]) <= 500
    # The 10x spikes survive the downsampling.
    batch_a = trainscope.read_run(a).regions
    batch_a = batch_a[batch_a["key"] == "BATCH"]["duration_ns"] / 1e9
    assert max(chart["a"]["hi"]) == pytest.approx(batch_a.max(), rel=1e-4)

    dom_text, console = browse(out, tmp_path, screenshot_path(tmp_path, "report-compare.png"),
                               1800)
    dom = check_rendered(dom_text, console, compare_charts(data))
    assert {"pair-0", "verdict-0"} <= dom.ids
    assert dom.badges[0] == "slower"
    assert 'data-verdict="slower"' in dom_text and a in dom_text and b in dom_text
    cells = compare_cells(dom)
    df = trainscope.compare(a, b)
    for _, row in df.iterrows():
        ((ratio, shown),) = cells[(row["quantity"], "ratio")]
        assert ratio == pytest.approx(row["ratio"], rel=1e-12)
        assert shown == f"{100 * (row['ratio'] - 1):+.1f}%"
        ((_, verdict),) = cells[(row["quantity"], "verdict")]
        assert verdict.startswith(row["verdict"])


def test_comparison_page_of_two_sweeps_has_a_section_per_configuration(tmp_path):
    for lr in ("0.1", "0.2"):
        write_run(str(tmp_path / "old" / lr), keys=COMPARE_KEYS, rows_per_key=400, seed=1,
                  params={"lr": lr, "version": "1"})
        write_run(str(tmp_path / "new" / lr), keys=COMPARE_KEYS, rows_per_key=400, seed=2,
                  scale=1.0 if lr == "0.1" else 1.3, params={"lr": lr, "version": "2"})
    page = trainscope.report([tmp_path / "old", tmp_path / "new"], compare=True,
                             output=tmp_path / "sweeps.html", title="sweeps")
    data, _ = page_data(page.path)
    assert [p["config"] for p in data["comparison"]["pairs"]] == ["lr=0.1", "lr=0.2"]
    dom_text, console = browse(page.path, tmp_path,
                               screenshot_path(tmp_path, "report-compare-sweeps.png"), 2600)
    dom = check_rendered(dom_text, console, compare_charts(data))
    assert {"pair-0", "pair-1"} <= dom.ids and "pair-2" not in dom.ids
    assert 'data-config="lr=0.1"' in dom_text and 'data-config="lr=0.2"' in dom_text
    assert "Configuration lr=0.2" in dom_text
    assert dom.badges[1] == "slower"  # lr=0.2's overall verdict


def test_comparison_page_errors_name_the_problem(tmp_path):
    cli = trainscope_cli()
    a = write_run(str(tmp_path / "a"), keys=COMPARE_KEYS, rows_per_key=100)
    done = subprocess.run([cli, "report", a, "--compare"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2
    assert "a comparison page needs two inputs (A and B), got 1" in done.stderr
    missing = str(tmp_path / "missing")
    done = subprocess.run([cli, "report", a, missing, "--compare", "-o", "compare.html"],
                          capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 1 and f"B: {missing}: no such run directory" in done.stderr
    assert not (tmp_path / "compare.html").exists()
    # Without -o: ./<B>-vs-<A>.html, replacing a page of ours, never another file.
    default = f"{os.path.basename(a)}-vs-{os.path.basename(a)}.html"
    (tmp_path / default).write_text("my notes", encoding="utf-8")
    done = subprocess.run([cli, "report", a, a, "--compare", "--quiet"], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 1 and "exists and is not a trainscope page" in done.stderr
    assert (tmp_path / default).read_text(encoding="utf-8") == "my notes"
    (tmp_path / default).unlink()
    for _ in range(2):  # the second replaces the first
        done = subprocess.run([cli, "report", a, a, "--compare", "--quiet"], capture_output=True,
                              text=True, cwd=tmp_path)
        assert done.returncode == 0 and done.stdout.strip() == f"wrote {default}", done.stderr
    done = subprocess.run([cli, "report", a, a, "--compare", "--quiet", "-o", "compare.html"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "wrote compare.html", done.stderr
    with pytest.raises(ValueError, match=r"needs two inputs \(A and B\), got 1"):
        trainscope.report(a, compare=True)
    with pytest.raises(FileNotFoundError, match="B: .*missing: no such run directory"):
        trainscope.report([a, missing], compare=True)


def test_the_diagnosis_shows_how_long_the_job_waited_for_a_cpu(tmp_path):
    """The host's contention share (the job's threads' run-queue wait, docs/steps.md) of the
    last 10 s is in the diagnosis document the page embeds and drawn in its section."""
    run_dir = write_run(str(tmp_path / "run"), keys=(("BATCH", "CPU"),), rows_per_key=200,
                        hardware_samples=60)
    host_csv = next(p for p in os.listdir(run_dir) if p.startswith("host-"))
    with open(os.path.join(run_dir, host_csv), encoding="utf-8") as f:
        last = max(int(line.split(",")[3]) for line in list(f)[1:])
    with open(os.path.join(run_dir, host_csv), "a", encoding="utf-8") as f:
        for i in range(5):
            f.write(f"system/proc.cpu_wait_pct,40,0,{last - 1000 * i},0\n")
    out = tmp_path / "waited.html"
    write_page([run_dir], out)
    data, _ = page_data(out)
    contention = data["diagnosis"]["host_now"][0]["contention"]
    assert contention["share"] == pytest.approx(0.4) and contention["readings"] == 5
    dom_text, console = browse(out, tmp_path)
    assert "waited for a CPU" in dom_text and "40.0%" in dom_text.split("waited for a CPU")[1][:400]


def test_the_diagnosis_shows_the_ledger_and_each_ranks_figures(tmp_path):
    """A run that recorded its tokens (issue 42): the page shows the ledger's line and a row
    per rank with its tokens/s, from the diagnosis document's typed ledger."""
    pytest.importorskip("torch")
    # pylint: disable-next=import-error,import-outside-toplevel
    from test_step_work import TOKENS, run_auto
    run_dir, _ = run_auto(tmp_path / "runs", [sys.executable, TOKENS, "-n", "20", "-s", "32"],
                          {"TRAINSCOPE_FLOPS": "off"})
    ledger = trainscope.ledger(run_dir)
    out = tmp_path / "ledger.html"
    write_page([run_dir], out)
    data, _ = page_data(out)
    assert data["diagnosis"]["ledger"]["line"] == ledger["line"]
    dom_text, console = browse(out, tmp_path)
    check_rendered(dom_text, console, run_charts(data))
    assert 'id="diagnosis-ledger"' in dom_text and ledger["line"] in dom_text, dom_text[:2000]
    shown = [float(v) for v in re.findall(r'data-value="([^"]+)" data-field="tokens_per_s"',
                                          dom_text)]
    assert shown == pytest.approx([r["tokens_per_s"] for r in ledger["ranks"]], rel=1e-12)


def test_the_diagnosis_names_the_label_of_a_labels_capture(tmp_path):
    """A capture asked by a label (captures/capture-r0-s57-memory-creep.json, issue 40): the
    page says the label at its step and links the trace."""
    run_dir = write_run(str(tmp_path / "run"), keys=(("BATCH", "CPU"),), rows_per_key=50)
    os.makedirs(os.path.join(run_dir, "captures"))
    with open(os.path.join(run_dir, "captures", "capture-r0-s57-memory-creep.json"), "w",
              encoding="utf-8") as f:
        f.write("[]")
    out = tmp_path / "label.html"
    write_page([run_dir], out)
    data, _ = page_data(out)
    assert data["diagnosis"]["captures"] == [
        {"rank": 0, "step": 57, "path": "captures/capture-r0-s57-memory-creep.json",
         "label": "MEMORY-CREEP"}]
    dom_text, console = browse(out, tmp_path)
    check_rendered(dom_text, console, run_charts(data))
    assert ('class="diag-capture" data-rank="0" data-step="57" data-label="MEMORY-CREEP"'
            in dom_text), dom_text[:2000]
    assert "Rank 0, MEMORY-CREEP appeared by step 57" in dom_text
    assert f'href="{run_dir}/captures/capture-r0-s57-memory-creep.json"' in dom_text
