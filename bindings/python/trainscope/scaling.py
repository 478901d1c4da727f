"""Scaling models: Extra-P's performance model normal form, from trainscope's C++.

The same API as C++ (include/trainscope/scaling/), same names and results::

    from trainscope import scaling

    runs = scaling.read_runs("trainscope-runs",
                             scaling.RunSelection(parameters=["p"], what="EPOCH"))
    model = scaling.fit(runs)                      # one series: no callpath/metric needed
    print(model)                                   # Model(p: 1.5 + 98.7 * p^(-1))
    model.evaluate(p=256)                          # or model.evaluate([256])
    series = runs.series[0]
    (pred,) = scaling.predict_with_band(model, series, [[256]])
    pred.lower <= pred.value <= pred.upper
    open("epoch.svg", "w").write(scaling.render_svg(model, series))

Inputs: parse_extrap_text / parse_extrap_json / parse_extrap_jsonl (a str),
read_extrap_file (a path), read_runs (a run, a directory of runs, a sweep
directory; RunSelection(by=["lr"]) for one series per value of lr, each with
its Series.group, repetitions=["seed"] for params whose values are
repetitions; runs at one point that differ in another param raise
ValueError, as `trainscope model` refuses them). Modeling: fit
(trainscope's modeler: Extra-P's search plus negative exponents, or
ModelOptions(modeler="extrap") for Extra-P 4.2.5 exactly) and fit_extrap.
Both take (parameters, series, options) as in C++, or (measurements,
callpath=None, metric=None, options). Views: predict_with_band,
measured_scaling, modeled_scaling, render_svg; measure_of.

Conventions:

* Enums (Measure, Modeler, RankAggregation) are also accepted as their names
  wherever one is taken: ModelOptions(modeler="extrap"), measure="median".
* Option structs take their fields as keyword arguments:
  ExtrapOptions(allow_negative_exponents=True); ExtrapOptions.set(key, value)
  parses a value as Extra-P's --options KEY=VALUE does.
* Attributes that are lists (Point.values, Series.points, Model.terms, ...)
  return copies: assign a new list instead of mutating the returned one.
  Struct-valued attributes (ModelOptions.extrap, PlotOptions.band) are live.
* Errors are exceptions carrying the C++ message: ValueError for invalid input
  (bad files name the file and line; too few points says "at least 3"),
  FileNotFoundError for missing files or run directories, RuntimeError
  otherwise (e.g. read_runs with no finished run left).
* Warnings: read_runs reports skipped runs (still RUNNING, failed, given
  twice) with warnings.warn(..., TrainscopeWarning), one per run, and returns
  the MeasurementSet as in C++. A model's own warnings (too few points, a
  non-physical extrapolation, ...) are in Model.warnings, not emitted. With
  fewer than 5 distinct values of a parameter, Model.too_few_points is True,
  Model.warnings[0] says so in words and predict_with_band's band is at least
  the points' prediction interval (unbounded, -inf/inf, with no degree of
  freedom left).
* Model.python() is a Python expression of the parameter names; evaluate it
  with ``from math import log2`` in scope.
"""

from trainscope._core import TrainscopeWarning
from trainscope._core._scaling import (BandOptions, Exponent, ExtrapOptions, Factor, Measure,
                                       MeasurementSet, Model, ModelCosts, Modeler, ModelOptions,
                                       PlotOptions, Point, Prediction, RankAggregation,
                                       RunSelection, ScalingView, Series, Term, fit, fit_extrap,
                                       measure_of, measured_scaling, modeled_scaling,
                                       parse_extrap_json, parse_extrap_jsonl, parse_extrap_text,
                                       predict_with_band, read_extrap_file, read_runs, render_svg)

__all__ = [
    "BandOptions",
    "Exponent",
    "ExtrapOptions",
    "Factor",
    "Measure",
    "MeasurementSet",
    "Model",
    "ModelCosts",
    "ModelOptions",
    "Modeler",
    "PlotOptions",
    "Point",
    "Prediction",
    "RankAggregation",
    "RunSelection",
    "ScalingView",
    "Series",
    "Term",
    "TrainscopeWarning",
    "fit",
    "fit_extrap",
    "measure_of",
    "measured_scaling",
    "modeled_scaling",
    "parse_extrap_json",
    "parse_extrap_jsonl",
    "parse_extrap_text",
    "predict_with_band",
    "read_extrap_file",
    "read_runs",
    "render_svg",
]

# The classes live in trainscope._core._scaling; show them (help(), repr of
# the types) under the public module.
for _cls in (BandOptions, Exponent, ExtrapOptions, Factor, Measure, MeasurementSet, Model,
             ModelCosts, ModelOptions, Modeler, PlotOptions, Point, Prediction, RankAggregation,
             RunSelection, ScalingView, Series, Term):
    _cls.__module__ = __name__
del _cls
