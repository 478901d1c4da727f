"""trainscope.scaling: the C++ scaling models (Extra-P's PMNF) from Python."""

import json
import math
import subprocess
import random
import warnings
from math import log2

import pytest

import trainscope
from trainscope import scaling
from run_files import trainscope_cli, write_run

PS = [1, 2, 4, 8, 16, 32, 64]


def _strong(p, c=2.0, a=100.0):
    return c + a / p


def _extrap_text(function, ps=PS, reps=3, noise=0.005, seed=7, region="epoch", metric="time"):
    """Extra-P's text format for function(p), reps repetitions each with seeded
    multiplicative noise of +-noise."""
    rng = random.Random(seed)
    lines = ["PARAMETER p", "POINTS " + " ".join(str(p) for p in ps), f"REGION {region}",
             f"METRIC {metric}"]
    for p in ps:
        values = [function(p) * (1 + rng.uniform(-noise, noise)) for _ in range(reps)]
        lines.append("DATA " + " ".join(repr(v) for v in values))
    return "\n".join(lines) + "\n"


def _eval_python(model, **names):
    return eval(model.python(), {"log2": log2, "__builtins__": {}}, names)  # noqa: S307


@pytest.fixture(name="strong")
def _strong_set(tmp_path):
    path = tmp_path / "strong.txt"
    path.write_text(_extrap_text(_strong))
    return scaling.read_extrap_file(path)


# --- inputs -----------------------------------------------------------------


def test_read_extrap_text_file(tmp_path):
    path = tmp_path / "m.txt"
    path.write_text("PARAMETER p\nPOINTS 4 8 16\nREGION epoch\nMETRIC time\n"
                    "DATA 1 2 3\nDATA 2\nDATA 3 3\nMETRIC bytes\nDATA 10\n")
    for source in (path, str(path)):  # os.PathLike or str
        ms = scaling.read_extrap_file(source)
        assert isinstance(ms, scaling.MeasurementSet)
        assert ms.parameters == ["p"]
        assert [(s.callpath, s.metric) for s in ms.series] == [("epoch", "time"),
                                                               ("epoch", "bytes")]
        time = ms.find("epoch", "time")
        assert [p.coordinate for p in time.points] == [[4.0], [8.0], [16.0]]
        assert [p.values for p in time.points] == [[1.0, 2.0, 3.0], [2.0], [3.0, 3.0]]
        assert len(ms.find("epoch", "bytes")) == 1
        assert ms.find("epoch", "nothing") is None


def test_parse_json_lines_and_text_agree():
    text = scaling.parse_extrap_text("PARAMETER p\nPOINTS 1 2 4\nDATA 1.5\nDATA 2.5\nDATA 4.5\n")
    lines = "\n".join(f'{{"params":{{"p":{p}}},"value":{v},"callpath":"","metric":""}}'
                      for p, v in [(1, 1.5), (2, 2.5), (4, 4.5)])
    jsonl = scaling.parse_extrap_jsonl(lines, "m.jsonl")
    assert jsonl.parameters == text.parameters == ["p"]
    assert ([(p.coordinate, p.values) for p in jsonl.series[0].points] ==
            [(p.coordinate, p.values) for p in text.series[0].points])


def test_input_errors_name_the_file_and_line(tmp_path):
    with pytest.raises(ValueError, match=r"^in\.txt:4: DATA: .*x.* is not a number"):
        scaling.parse_extrap_text("PARAMETER p\nPOINTS 1 2\nDATA 1\nDATA x\n", "in.txt")
    with pytest.raises(ValueError, match=r"<string>:1: empty file"):
        scaling.parse_extrap_text("")
    with pytest.raises(FileNotFoundError, match="cannot open"):
        scaling.read_extrap_file(tmp_path / "missing.txt")


# --- fitting ------------------------------------------------------------------


def test_fit_recovers_a_negative_exponent(strong):
    model = scaling.fit(strong)  # the one series: no callpath/metric needed
    assert model.parameters == ["p"]
    (term,) = model.terms
    (factor,) = term.factors
    assert factor.parameter == 0
    assert factor.poly.value == -1 and factor.poly.text == "-1"
    assert factor.log.is_zero()
    assert model.constant == pytest.approx(2.0, abs=0.3)
    assert term.coefficient == pytest.approx(100.0, rel=0.01)
    assert model.costs.smape < 1.0 and model.costs.ar2 > 0.999
    assert "p^(-1)" in model.formula()
    assert repr(model) == f"Model(p: {model.formula()})"
    assert str(model) == model.formula()
    # Same model from the C++ signature and from callpath/metric.
    series = strong.find("epoch", "time")
    for same in (scaling.fit(strong.parameters, series), scaling.fit(strong, "epoch", "time"),
                 scaling.fit(strong, metric="time", options=scaling.ModelOptions())):
        assert same.formula() == model.formula()


def test_model_evaluate_python_and_cpp_agree(strong):
    model = scaling.fit(strong)
    for p in (1, 3, 64, 1000):
        expected = model.constant + model.terms[0].coefficient / p
        assert model.evaluate([p]) == pytest.approx(expected, rel=1e-12)
        assert model.evaluate(p) == model.evaluate(p=p) == model.evaluate({"p": p})
        assert _eval_python(model, p=p) == pytest.approx(model.evaluate(p=p), rel=1e-12)
    assert "std::pow(p, -1.0)" in model.cpp()
    with pytest.raises(TypeError, match="'q' is not a parameter"):
        model.evaluate(p=4, q=2)
    with pytest.raises(TypeError, match="no value for parameter 'p'"):
        model.evaluate(q=2)
    with pytest.raises(ValueError, match="2 coordinate value"):
        model.evaluate([4, 8])


def test_python_form_of_a_multi_factor_model():
    fraction, number = scaling.Exponent.Fraction, scaling.Exponent.Number
    model = scaling.Model(
        parameters=["p", "q"], constant=-3.5,
        terms=[scaling.Term(2.0, [scaling.Factor(0, fraction(2, 4), fraction(1, 1)),
                                  scaling.Factor(1, number(-0.75))]),
               scaling.Term(-1e-05, [scaling.Factor(1, log=fraction(2, 1))])])
    assert model.formula() == ("-3.5 + 2.0 * p^(1/2) * log2(p)^(1) * q^(-0.75)"
                               " + -1e-05 * log2(q)^(2)")
    assert model.python() == "-3.5+2.0*p**(1/2)*log2(p)**(1)*q**(-0.75)-1e-05*log2(q)**(2)"
    for p, q in [(4, 16), (64, 3), (1024, 1024)]:
        assert _eval_python(model, p=p, q=q) == pytest.approx(model.evaluate(p=p, q=q), rel=1e-12)
    with pytest.raises(ValueError, match="denominator is 0"):
        scaling.Exponent.Fraction(1, 0)


def test_extrap_modeler_searches_no_negative_exponents(strong):
    by_enum = scaling.fit(strong, options=scaling.ModelOptions(modeler=scaling.Modeler.EXTRAP))
    by_name = scaling.fit(strong, options=scaling.ModelOptions(modeler="extrap"))
    direct = scaling.fit_extrap(strong)
    assert by_enum.formula() == by_name.formula() == direct.formula()
    # Extra-P's default search has no p^(-1): on strong-scaling data it picks a
    # growing term with a negative coefficient, which fits worse than
    # trainscope's model and goes non-physical (negative) within the range.
    assert all(f.poly.value >= 0 and f.log.value >= 0 for t in direct.terms for f in t.factors)
    assert direct.costs.smape > 10 * scaling.fit(strong).costs.smape
    assert direct.evaluate(p=64) < 0
    assert _eval_python(direct, p=64) == pytest.approx(direct.evaluate(p=64), rel=1e-12)
    # Allowing negative exponents (Extra-P's own option) finds p^(-1) again.
    options = scaling.ExtrapOptions()
    options.set("allow_negative_exponents", True)
    assert options.allow_negative_exponents is True
    assert "p^(-1)" in scaling.fit_extrap(strong, options=options).formula()


def test_extrap_modeler_gives_a_constant_model_on_flat_data(tmp_path):
    path = tmp_path / "flat.txt"
    path.write_text(_extrap_text(lambda p: 5.0, noise=0.0))
    ms = scaling.read_extrap_file(path)
    model = scaling.fit(ms, options=scaling.ModelOptions(modeler="extrap"))
    assert model.is_constant() and model.terms == []
    assert model.formula() == model.python() == "5.0"
    assert _eval_python(model) == model.evaluate(p=1e6) == 5.0


def test_fit_errors_raise_with_the_message():
    two_points = scaling.Series("epoch", "time",
                                [scaling.Point([1], [3.0]), scaling.Point([2], [2.0])])
    for fit in (scaling.fit, scaling.fit_extrap):
        with pytest.raises(ValueError, match="at least 3") as error:
            fit(["p"], two_points)
        assert "'epoch' / 'time'" in str(error.value)
    with pytest.raises(ValueError, match="no measurements"):
        scaling.fit(["p"], scaling.Series())
    ms = scaling.MeasurementSet(["p"], [two_points, scaling.Series("epoch", "bytes")])
    with pytest.raises(ValueError, match="2 series match"):
        scaling.fit(ms)
    with pytest.raises(ValueError, match="no series matches"):
        scaling.fit(ms, "nothing")


def test_options_by_keyword_and_by_name():
    options = scaling.ModelOptions(
        modeler="extrap", negative_exponents=False,
        extrap=scaling.ExtrapOptions(measure="median", allow_log_terms=False))
    assert options.modeler == scaling.Modeler.EXTRAP
    assert options.extrap.measure == scaling.Measure.MEDIAN
    options.extrap.set("poly_exponents", [1, 2, 0.5])  # the nested options are live
    assert options.extrap.poly_exponents == "1,2,0.5"
    options.extrap.measure = "max"
    assert options.extrap.measure == scaling.Measure.MAXIMUM
    assert scaling.RunSelection(ranks="max").ranks == scaling.RankAggregation.MAX
    assert scaling.measure_of([1, 2, 10], "median") == 2.0
    assert scaling.measure_of([1, 2, 10], scaling.Measure.MINIMUM) == 1.0
    with pytest.raises(ValueError, match="unknown measure 'avg'"):
        scaling.measure_of([1.0], "avg")
    with pytest.raises(ValueError, match="unknown modeler 'bogus'"):
        scaling.ModelOptions(modeler="bogus")
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        scaling.BandOptions(bogus=1)
    with pytest.raises(ValueError, match="unknown modeler option 'nope'"):
        scaling.ExtrapOptions().set("nope", 1)
    with pytest.raises(ValueError, match="not a boolean"):
        scaling.ExtrapOptions().set("allow_log_terms", "maybe")


# --- predictions, views, plots ------------------------------------------------------


def test_predictions_carry_a_band(strong):
    model = scaling.fit(strong)
    series = strong.series[0]
    points = [[128], 256, {"p": 512}]
    band = scaling.BandOptions(resamples=200)
    predictions = scaling.predict_with_band(model, series, points, band)
    assert [p.coordinate for p in predictions] == [[128.0], [256.0], [512.0]]
    for prediction in predictions:
        assert prediction.lower <= prediction.value <= prediction.upper
        assert prediction.value == model.evaluate(prediction.coordinate)
        assert prediction.upper - prediction.lower < 0.1 * prediction.value
    again = scaling.predict_with_band(model, series, points, band)
    assert [(p.lower, p.upper) for p in again] == [(p.lower, p.upper) for p in predictions]
    with pytest.raises(ValueError, match="confidence"):
        scaling.predict_with_band(model, series, points, scaling.BandOptions(confidence=1.5))


def test_render_svg(strong):
    model = scaling.fit(strong)
    svg = scaling.render_svg(model, strong.series[0], scaling.PlotOptions(title="epoch time"))
    assert svg.lstrip().startswith(("<svg", "<?xml"))
    assert "epoch time" in svg and svg.rstrip().endswith("</svg>")
    with pytest.raises(ValueError, match="x parameter 1 is out of range"):
        scaling.render_svg(model, strong.series[0], scaling.PlotOptions(x_parameter=1))


def test_measured_and_modeled_scaling_of_perfect_strong_scaling():
    series = scaling.Series("epoch", "time",
                            [scaling.Point([p], [100.0 / p] * 2) for p in (4, 1, 2, 8, 16)])
    views = scaling.measured_scaling(series, 0, [0.0], "mean")
    assert [v.resource for v in views] == [1, 2, 4, 8, 16]  # sorted; r0 = 1
    for v in views:
        assert v.efficiency == pytest.approx(1.0)
        assert v.speedup == pytest.approx(v.resource)
        assert v.cost == pytest.approx(100.0)
    model = scaling.fit(["p"], series)
    modeled = scaling.modeled_scaling(model, 0, None, [1, 32, 64])
    assert [v.resource for v in modeled] == [1, 32, 64]
    assert all(v.efficiency == pytest.approx(1.0, rel=1e-6) for v in modeled)
    with pytest.raises(ValueError, match="at least two"):
        scaling.measured_scaling(scaling.Series(points=[scaling.Point([1], [1.0])]))


# --- runs -------------------------------------------------------------------------


@pytest.fixture(name="no_inherited_run")
def _no_inherited_run(monkeypatch):
    monkeypatch.delenv("TRAINSCOPE_RUN_DIR", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    yield
    trainscope.end_run()


def _run(root, p, batches=3):
    with trainscope.start_run(params={"p": p}, root=root) as run:
        tmr = trainscope.Timer()
        for _ in range(batches):
            tmr.start(trainscope.TimeType.BATCH)
            tmr.end(trainscope.TimeType.BATCH)
        trainscope.log_metric("loss", 1.0 / p)
    return run.dir


@pytest.mark.usefixtures("no_inherited_run")
def test_read_runs_of_python_runs(tmp_path):
    dirs = [_run(tmp_path, p) for p in (1, 2, 4)]
    ms = scaling.read_runs(tmp_path, scaling.RunSelection(parameters=["p"]))  # a directory of runs
    assert ms.parameters == ["p"]
    (series,) = ms.series
    assert (series.callpath, series.metric) == ("BATCH", "mean")
    assert sorted(p.coordinate[0] for p in series.points) == [1, 2, 4]
    assert all(len(p.values) == 1 and p.values[0] >= 0 for p in series.points)

    loss = scaling.RunSelection(parameters=["p"], what="metric:loss", stat="last")
    metric = scaling.read_runs(dirs, loss)
    assert ({p.coordinate[0]: p.values for p in metric.series[0].points} ==
            {1: [1.0], 2: [0.5], 4: [0.25]})
    model = scaling.fit(metric)
    assert model.evaluate(p=8) == pytest.approx(0.125, rel=1e-6)

    with pytest.raises(ValueError, match='no param "n"'):
        scaling.read_runs(dirs, scaling.RunSelection(parameters=["n"]))
    with pytest.raises(ValueError, match='"FORWARD"'):
        scaling.read_runs(dirs, scaling.RunSelection(parameters=["p"], what="FORWARD"))


@pytest.mark.usefixtures("no_inherited_run")
def test_read_runs_warns_about_skipped_runs(tmp_path):
    dirs = [_run(tmp_path, p) for p in (1, 2)]
    running = trainscope.start_run(params={"p": 4}, root=tmp_path)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ms = scaling.read_runs(dirs + [running.dir, dirs[0]],
                                   scaling.RunSelection(parameters=["p"]))
    finally:
        running.end()
    assert len(ms.series[0].points) == 2
    messages = [str(w.message) for w in caught if issubclass(w.category, scaling.TrainscopeWarning)]
    assert len(messages) == 2
    assert any("still RUNNING" in m for m in messages)
    assert any("given twice" in m for m in messages)
    assert caught[0].filename == __file__  # attributed to the caller
    with pytest.raises(FileNotFoundError, match="no such run directory"):
        scaling.read_runs(tmp_path / "missing", scaling.RunSelection(parameters=["p"]))


def test_public_names():
    for name in scaling.__all__:
        obj = getattr(scaling, name)
        assert obj.__doc__, name
        if isinstance(obj, type) and name != "TrainscopeWarning":
            assert obj.__module__ == "trainscope.scaling"
    assert not math.isnan(scaling.measure_of([1.0]))


@pytest.mark.parametrize("name, identifier", [("batch-size", "batch_size"), ("1st", "_1st"),
                                              ("lambda", "lambda_"), ("log2", "log2_"),
                                              ("n", "n")])
def test_parameter_names_become_identifiers_in_the_expressions(tmp_path, name, identifier):
    path = tmp_path / "m.txt"
    path.write_text(_extrap_text(_strong).replace("PARAMETER p", f"PARAMETER {name}"))
    model = scaling.fit(scaling.read_extrap_file(path))
    assert model.identifiers() == {name: identifier}
    assert identifier in model.python() and identifier in model.cpp()
    # The expression is valid Python and evaluates to the model at a point.
    value = eval(model.python(), {"log2": log2, "__builtins__": {}},  # noqa: S307
                 {identifier: 48.0})
    assert value == pytest.approx(model.evaluate(48.0), rel=1e-12)


def test_model_json_maps_parameters_to_identifiers(tmp_path):
    cli = trainscope_cli()
    path = tmp_path / "m.txt"
    path.write_text(_extrap_text(_strong).replace("PARAMETER p", "PARAMETER batch-size"))
    done = subprocess.run([cli, "model", "--json", str(path)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    model = result["models"][0] if "models" in result else result[0]
    assert model["identifiers"] == {"batch-size": "batch_size"}
    assert "batch_size**(" in model["python"] and "batch-size" not in model["python"]


def test_a_series_missing_a_coordinate_is_refused_by_extrap_and_modeled_by_default():
    # the file's POINTS are 5 coordinates; the region "short" has DATA for 4
    text = ("PARAMETER p\nPOINTS 2 4 8 16 32\nREGION full\nMETRIC time\n"
            + "".join(f"DATA {3 + 0.5 * p} {3.01 + 0.5 * p}\n" for p in (2, 4, 8, 16, 32))
            + "REGION short\nMETRIC time\n"
            + "".join(f"DATA {3 + 0.5 * p} {3.01 + 0.5 * p}\n" for p in (2, 4, 8, 16)))
    measurements = scaling.parse_extrap_text(text, "in.txt")
    assert measurements.coordinates == [[2.0], [4.0], [8.0], [16.0], [32.0]]
    short = measurements.find("short", "time")
    assert measurements.missing_coordinates(short) == [[32.0]]
    assert measurements.missing_coordinates(measurements.find("full", "time")) == []
    with pytest.raises(ValueError, match=r"callpath 'short', metric 'time' has no measurement at \(p=32\)"):
        scaling.fit(measurements, "short", "time", scaling.ModelOptions(modeler="extrap"))
    model = scaling.fit(measurements, "short", "time")
    assert "(p=32)" in model.warnings[0] and "4 of 5" in model.warnings[0]
    assert not any("no measurement" in w for w in scaling.fit(measurements, "full", "time").warnings)


def test_parsimony_keeps_a_noisy_constant_constant():
    text = _extrap_text(lambda p: 7.0, ps=[2, 4, 8, 16, 32], reps=5, noise=0.01, seed=3)
    measurements = scaling.parse_extrap_text(text, "in.txt")
    assert scaling.fit(measurements).is_constant()
    assert scaling.ModelOptions().significance == 0.05
    strong = scaling.parse_extrap_text(_extrap_text(_strong, ps=[2, 4, 8, 16, 32], reps=5, noise=0.03),
                                       "in.txt")
    assert not scaling.fit(strong).is_constant()


# --- sweeps: a sweep directory, other params that vary, too few points (issue 26) ---------------

def _sweep(root, batch_sizes=(32, 64, 128), lrs=("0.1", "0.01")):
    """A sweep directory written by hand: sweep.json and runs/job-N, batch_size x lr; the BATCH
    time grows with batch_size for lr 0.1 only."""
    (root / "runs").mkdir(parents=True)
    (root / "sweep.json").write_text("{}")
    n = 0
    for bs in batch_sizes:
        for lr in lrs:
            n += 1
            write_run(root / "runs" / f"job-{n}", run_id=f"{n:032x}",
                      params={"batch_size": str(bs), "lr": lr}, keys=(("BATCH", "CPU"),),
                      scale=bs / 32 if lr == "0.1" else 1.0, seed=n)
    return root


def _model(*args):
    return subprocess.run([trainscope_cli(), "model", *map(str, args)], capture_output=True,
                          text=True, timeout=60, check=False)


def test_model_takes_a_sweep_directory_and_refuses_params_that_vary_at_a_point(tmp_path):
    sweep = _sweep(tmp_path / "sweep")
    done = _model("--params", "batch_size", sweep)
    assert done.returncode == 1, done.stdout
    assert "not a run" not in done.stderr  # the sweep's runs/ were found
    assert "the runs at one point differ in lr (0.01, 0.1)" in done.stderr, done.stderr
    assert "--by lr" in done.stderr and "--repetition lr" in done.stderr
    assert "--params batch_size,lr" in done.stderr

    by = _model("--params", "batch_size", "--by", "lr", "--json", sweep)
    assert by.returncode == 0, by.stderr
    models = json.loads(by.stdout)["models"]
    assert [m["group"] for m in models] == [{"lr": "0.01"}, {"lr": "0.1"}]
    assert [m["points"] for m in models] == [3, 3]
    text = _model("--params", "batch_size", "--by", "lr", sweep)
    assert "BATCH / mean [lr=0.1]  (3 points, 3 values" in text.stdout, text.stdout

    same = _model("--params", "batch_size", "--repetition", "lr", "--json", sweep)
    assert same.returncode == 0, same.stderr
    (model,) = json.loads(same.stdout)["models"]
    assert model["group"] == {} and model["values"] == 6


@pytest.mark.usefixtures("no_inherited_run")
def test_read_runs_by_and_repetitions(tmp_path):
    sweep = _sweep(tmp_path / "sweep")
    with pytest.raises(ValueError, match=r"differ in lr \(0.01, 0.1\)"):
        scaling.read_runs(sweep, scaling.RunSelection(parameters=["batch_size"]))
    ms = scaling.read_runs(sweep, scaling.RunSelection(parameters=["batch_size"], by=["lr"]))
    assert [s.group for s in ms.series] == [{"lr": "0.01"}, {"lr": "0.1"}]
    assert "group={'lr': '0.1'}" in repr(ms.series[1])
    with pytest.raises(ValueError, match="one per group"):
        scaling.fit(ms)
    for series in ms.series:
        assert scaling.fit(ms.parameters, series).too_few_points
    one = scaling.read_runs(sweep, scaling.RunSelection(parameters=["batch_size"],
                                                        repetitions=["lr"]))
    assert len(one.series) == 1 and sum(len(p.values) for p in one.series[0].points) == 6
    assert scaling.RunSelection(by=["lr"]).by == ["lr"]


def test_too_few_points_say_so_and_the_band_reflects_it(tmp_path):
    # The case: 3 batch sizes (lr taken as repetitions on purpose) fall back to a
    # constant that misses the points (SMAPE 32%); it printed "adj. R^2 1" and a tight band.
    sweep = _sweep(tmp_path / "sweep")
    args = ["--params", "batch_size", "--repetition", "lr", "--predict", "batch_size=256", sweep]
    text = _model(*args)
    assert text.returncode == 0, text.stderr
    assert "caution: too few points to tell how the value scales with batch_size" in text.stdout
    assert "adj. R^2 0 (a constant explains no variation)" in text.stdout, text.stdout
    done = _model("--json", *args)
    (model,) = json.loads(done.stdout)["models"]
    assert model["too_few_points"] is True and model["terms"] == []
    assert model["costs"]["ar2"] == 0
    assert model["warnings"][0].startswith("too few points")
    (prediction,) = model["predictions"]
    # The band holds every measured point's mean (the constant explains none of them).
    selection = scaling.RunSelection(parameters=["batch_size"], repetitions=["lr"])
    series = scaling.read_runs(sweep, selection).series[0]
    means = [sum(p.values) / len(p.values) for p in series.points]
    assert prediction["lower"] < min(means) and prediction["upper"] > max(means), (prediction, means)
    fitted = scaling.fit(scaling.read_runs(sweep, selection))
    assert fitted.too_few_points and "Extra-P's rule" in fitted.warnings[0]
    (band,) = scaling.predict_with_band(fitted, series, [[256]])
    assert band.lower < min(means) and band.upper > max(means)
