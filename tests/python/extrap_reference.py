"""Extra-P's own models of an Extra-P text file, as JSON (the shape of `trainscope model --json`).

Run with the python of a venv that has Extra-P (tests/python/requirements-extrap.txt):

    VENV/bin/python extrap_reference.py INPUT.txt [--option KEY=VALUE ...] [--measure M]
                                        [--predict p=64 ...] [--cli-measure-quirk]
    VENV/bin/python extrap_reference.py --batch JOBS.json

It does what `extrap --text INPUT.txt --options KEY=VALUE ...` does: TextFileReader
(JsonFileReader for .json / .jsonl),
ModelGenerator with the default modeler, options set on the modeler with setattr (for
more than one parameter, an option of the single-parameter modeler goes to the nested
single-parameter modeler, as `--options #spo KEY=VALUE` would; an option the
multi-parameter modeler has itself goes to it, as `--options KEY=VALUE` would), then
model_all. Output:

    {"parameters": [...], "modeler": "extrap", "extrap_version": "4.2.5",
     "models": [{"callpath", "metric", "formula", "python", "cpp": null, "constant",
                 "terms": [{"coefficient", "factors": [{"parameter", "poly", "poly_value",
                                                         "log", "log_value"}]}],
                 "costs": {"rss", "rrss", "nrss", "smape", "ar2", "re"},
                 "warnings": [...], "predictions": [...]}]}

Costs are the hypothesis' fields (_RSS, _rRSS, _nRSS, _SMAPE, _AR2, _RE) as Extra-P left them
(for one parameter: the leave-one-out sums of the cross-validation). NaN and infinities are
written as JSON NaN / Infinity.

Each model also lists its "ties": the other hypotheses Extra-P fitted for it (same keys:
formula, constant, terms, costs, predictions) that passed its term-contribution check and whose
compared cost (SMAPE, or RSS with compare_with_RSS) equals the chosen one's to 1e-9 relative.
They are the same function on the measured points (a cross of points makes c + a*t1 + b*t2,
c + a*t1 + b*t1*t2 and c + a*t2 + b*t1*t2 agree there): which one Extra-P keeps is decided by
the last bits of numpy's least squares and differs between BLAS kernels (try
OPENBLAS_CORETYPE=Haswell and =Sandybridge); trainscope keeps the first, as Extra-P's "<" does
in exact arithmetic.

--measure: Extra-P 4.2.5's command line ignores --measure for single-parameter experiments
(ModelGenerator only passes use_measure to multi-parameter modelers), so this script sets the
measure on the modeler in every case; --cli-measure-quirk reproduces the command line instead.
"""

import argparse
import json
import sys
import warnings


def _parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--measure", default="mean", choices=["mean", "median", "minimum", "maximum"])
    parser.add_argument("--predict", action="append", default=[], metavar="p=64[,q=...]")
    parser.add_argument("--cli-measure-quirk", action="store_true",
                        help="ignore --measure for one parameter, as extrap's command line does")
    parser.add_argument("--batch", action="store_true",
                        help="INPUT is a JSON list of jobs {input, options, measure, predict}; "
                             "prints a JSON list of results")
    return parser.parse_args(argv)


def _convert(option, raw):
    """A string option value converted as extrap's --options parser does."""
    from extrap.util.options_parser import _modeler_option_bool
    if option.type is bool:
        return _modeler_option_bool(raw)
    value = option.type(raw)
    if option.range is not None and value not in option.range:
        raise SystemExit(f"option {option.field}: {raw!r} is not one of {list(option.range)}")
    return value


def _options_of(modeler):
    from extrap.modelers.modeler_options import modeler_options
    return {o.field: o for o in modeler_options.iter(modeler)}


def _apply_options(modeler, pairs):
    from extrap.modelers.abstract_modeler import MultiParameterModeler
    own = _options_of(modeler)
    nested = None
    if isinstance(modeler, MultiParameterModeler) and modeler.single_parameter_modeler is not None:
        nested = modeler.single_parameter_modeler
    nested_options = _options_of(nested) if nested is not None else {}
    # as extrapcmd: the nested single-parameter options first, then the modeler's own
    nested_values, own_values = [], []
    for pair in pairs:
        if "=" not in pair:
            raise SystemExit(f"--option {pair!r}: expected KEY=VALUE")
        key, raw = pair.split("=", 1)
        key = key.strip()
        if key in own:
            own_values.append((key, _convert(own[key], raw)))
        elif key in nested_options:
            nested_values.append((key, _convert(nested_options[key], raw)))
        else:
            known = sorted(set(own) | set(nested_options))
            raise SystemExit(f"unknown modeler option {key!r} (known: {', '.join(known)})")
    for key, value in nested_values:
        setattr(nested, key, value)
    for key, value in own_values:
        setattr(modeler, key, value)


def _exponent_text(value):
    from fractions import Fraction
    if isinstance(value, Fraction):
        return str(value)  # "1/2", "2", "-3/4"
    if isinstance(value, int):
        return str(value)
    f = float(value)
    return str(int(f)) if f.is_integer() else repr(f)


def _factor(parameter, compound_term):
    poly, log = 0, 0
    for simple in compound_term.simple_terms:
        if simple.term_type == "polynomial":
            poly = simple.exponent
        elif simple.term_type == "logarithm":
            log = simple.exponent
        else:
            raise SystemExit(f"unexpected term type {simple.term_type!r}")
    return {"parameter": parameter, "poly": _exponent_text(poly), "poly_value": float(poly),
            "log": _exponent_text(log), "log_value": float(log)}


def _terms(function, parameters):
    from extrap.entities.terms import CompoundTerm, MultiParameterTerm
    terms = []
    for term in function.compound_terms:
        if isinstance(term, MultiParameterTerm):
            coefficient = float(term.coefficient)
            factors = []
            for index, compound in term.parameter_term_pairs:
                coefficient *= float(compound.coefficient)
                factors.append(_factor(parameters[index], compound))
        elif isinstance(term, CompoundTerm):
            coefficient = float(term.coefficient)
            factors = [_factor(parameters[0], term)]
        else:
            raise SystemExit(f"unexpected term {term!r}")
        terms.append({"coefficient": coefficient, "factors": factors})
    return terms


def _number(x):
    return float(x)


def _costs(hypothesis):
    return {"rss": _number(hypothesis._RSS), "rrss": _number(hypothesis._rRSS),
            "nrss": _number(hypothesis._nRSS), "smape": _number(hypothesis._SMAPE),
            "ar2": _number(hypothesis._AR2), "re": _number(hypothesis._RE)}


def _parse_point(text, parameters):
    point = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if name.strip() not in parameters:
            raise SystemExit(f"--predict {text!r}: unknown parameter {name.strip()!r}")
        point[name.strip()] = float(value)
    missing = [p for p in parameters if p not in point]
    if missing:
        raise SystemExit(f"--predict {text!r}: missing {', '.join(missing)}")
    return point


TIE_RELATIVE = 1e-9   # as kCostTieRelative in src/scaling/extrap_internal.hpp
TIE_FLOOR = 1e-12


def _tied(a, b):
    import math
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b
    return abs(a - b) <= TIE_RELATIVE * max(abs(a), abs(b)) + TIE_FLOOR


class _Candidates:
    """Records every top-level hypothesis Extra-P fits, per model (the tracker's index)."""

    def __init__(self, tracker, multi):
        self.tracker, self.multi, self.by_model, self._patched = tracker, multi, {}, []

    def _record(self, hypothesis, measurements):
        import copy
        import numpy
        contribution_ok = True
        with numpy.errstate(divide="ignore", invalid="ignore"):
            for term in hypothesis.function.compound_terms:
                if term.coefficient == 0 or hypothesis.calc_term_contribution(term, measurements) < 0.0005:
                    contribution_ok = False
                    break
        self.by_model.setdefault(self.tracker.index, []).append(
            {"id": id(hypothesis), "function": copy.deepcopy(hypothesis.function),
             "costs": _costs(hypothesis), "ok": contribution_ok})

    def __enter__(self):
        from extrap.entities import hypotheses as h
        recorder = self
        if self.multi:
            cost, ar2 = h.MultiParameterHypothesis.compute_cost, h.MultiParameterHypothesis.compute_adjusted_rsquared

            def compute_cost(hyp, measurements):
                cost(hyp, measurements)
                recorder._record(hyp, measurements)

            def compute_adjusted_rsquared(hyp, tss, measurements):
                ar2(hyp, tss, measurements)
                for entry in reversed(recorder.by_model.get(recorder.tracker.index, [])):
                    if entry["id"] == id(hyp):
                        entry["costs"]["ar2"] = _number(hyp._AR2)
                        break

            self._patched = [(h.MultiParameterHypothesis, "compute_cost", cost),
                             (h.MultiParameterHypothesis, "compute_adjusted_rsquared", ar2)]
            h.MultiParameterHypothesis.compute_cost = compute_cost
            h.MultiParameterHypothesis.compute_adjusted_rsquared = compute_adjusted_rsquared
        else:
            ar2 = h.SingleParameterHypothesis.compute_adjusted_rsquared

            def single_ar2(hyp, tss, measurements):
                ar2(hyp, tss, measurements)
                recorder._record(hyp, measurements)

            self._patched = [(h.SingleParameterHypothesis, "compute_adjusted_rsquared", ar2)]
            h.SingleParameterHypothesis.compute_adjusted_rsquared = single_ar2
        return self

    def __exit__(self, *exc):
        for cls, name, original in self._patched:
            setattr(cls, name, original)
        return False

    def ties(self, index, chosen, compare_with_rss):
        key = "rss" if compare_with_rss else "smape"
        target = _costs(chosen)[key]
        return [e for e in self.by_model.get(index, []) if e["ok"] and _tied(e["costs"][key], target)]


class _Tracker:
    """A progress bar for model_all that remembers which model is being made (to attribute warnings)."""

    def __init__(self):
        self.index = -1

    def __call__(self, iterable, *args, **kwargs):
        for item in iterable:
            self.index += 1
            yield item

    def step(self, *args, **kwargs):
        pass

    def __getattr__(self, name):  # total, update, ...: ignored
        return lambda *a, **k: None


def _read(path):
    if path.endswith(".json") or path.endswith(".jsonl"):
        from extrap.fileio.file_reader.json_file_reader import JsonFileReader
        return JsonFileReader().read_experiment(path)
    from extrap.fileio.file_reader.text_file_reader import TextFileReader
    return TextFileReader().read_experiment(path)


def reference(path, options=(), measure="mean", predict=(), cli_measure_quirk=False):
    """Extra-P's models of one input file, as the JSON document (a dict)."""
    import extrap
    from extrap.entities.measurement import Measure
    from extrap.modelers.model_generator import ModelGenerator
    from extrap.util.string_formats import FunctionFormats

    experiment = _read(path)
    parameters = [str(p.name) for p in experiment.parameters]
    use_measure = Measure.from_str(measure)
    generator = ModelGenerator(experiment, modeler="default", name="reference", use_measure=use_measure)
    if not (cli_measure_quirk and len(parameters) == 1):
        generator.modeler.use_measure = use_measure
    _apply_options(generator.modeler, options)

    points = [_parse_point(text, parameters) for text in predict]
    tracker = _Tracker()
    candidates = _Candidates(tracker, multi=len(parameters) > 1)
    compare_with_rss = bool(getattr(generator.modeler, "compare_with_RSS", False))
    recorded = {}

    def show(message, category, filename, lineno, file=None, line=None):
        # Extra-P's own warnings, once each; not numpy's floating-point RuntimeWarnings
        if issubclass(category, RuntimeWarning):
            return
        messages = recorded.setdefault(tracker.index, [])
        if str(message) not in messages:
            messages.append(str(message))

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        with candidates:
            generator.model_all(tracker)

    def predictions_of(function):
        predictions = []
        for point in points:
            coordinate = [point[p] for p in parameters]
            if len(parameters) == 1:
                value = function.evaluate(coordinate[0])
            else:
                value = function.evaluate({i: v for i, v in enumerate(coordinate)})
            predictions.append({"point": point, "value": float(value)})
        return predictions

    models = []
    for index, ((callpath, metric), model) in enumerate(generator.models.items()):
        hypothesis = model.hypothesis
        function = hypothesis.function
        chosen = function.to_string(*parameters)
        ties, seen = [], {chosen}
        for entry in candidates.ties(index, hypothesis, compare_with_rss):
            formula = entry["function"].to_string(*parameters)
            if formula in seen:
                continue
            seen.add(formula)
            ties.append({"formula": formula, "constant": float(entry["function"].constant_coefficient),
                         "terms": _terms(entry["function"], parameters), "costs": entry["costs"],
                         "predictions": predictions_of(entry["function"])})
        models.append({
            "callpath": callpath.name,
            "metric": metric.name,
            "formula": chosen,
            "python": function.to_string(*parameters, format=FunctionFormats.PYTHON),
            "cpp": None,
            "constant": float(function.constant_coefficient),
            "terms": _terms(function, parameters),
            "costs": _costs(hypothesis),
            "warnings": recorded.get(index, []),
            "predictions": predictions_of(function),
            "ties": ties,
        })
    return {"parameters": parameters, "modeler": "extrap", "extrap_version": extrap.__version__,
            "models": models}


def main(argv=None):
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    if args.batch:
        # [{"input": PATH, "options": [...], "measure": M, "predict": [...]}, ...] -> a JSON list,
        # one document (or {"error": "..."}) per job: one interpreter start for many files.
        with open(args.input, encoding="utf-8") as f:
            jobs = json.load(f)
        results = []
        for job in jobs:
            try:
                results.append(reference(job["input"], job.get("options", ()), job.get("measure", "mean"),
                                         job.get("predict", ()), job.get("cli_measure_quirk", False)))
            except (Exception, SystemExit) as error:  # noqa: BLE001 - reported per job
                results.append({"error": f"{type(error).__name__}: {error}"})
        json.dump(results, sys.stdout)
    else:
        json.dump(reference(args.input, args.option, args.measure, args.predict, args.cli_measure_quirk),
                  sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
