"""Extra-P text input files generated from known functions (stdlib only).

Each case is a function of the parameters (p; or p, q; or p, q, r) sampled on a
small set of points, with a few repetitions per point and multiplicative noise
from a seeded random.Random, so every file is the same on every machine. The
cases are what tests/python/test_model_vs_extrap.py and the bench scripts feed
both to Extra-P and to `trainscope model`.

    import gen_extrap_inputs as gen
    for case in gen.all_cases():
        path = gen.write_case(case, tmp_dir)            # NAME.txt; fmt="json" / "jsonl" too

or, from a shell, `python gen_extrap_inputs.py OUT_DIR` writes every case there.

Text format (Extra-P's TextFileReader):
    PARAMETER p            (one line per parameter, or several names on one line)
    POINTS 2 4 8 16 32     (multi-parameter: POINTS ( 2 2 ) ( 2 4 ) ...)
    REGION name
    METRIC name
    DATA v1 v2 v3          (one line per point, in POINTS order; one value per repetition)
The same measurements can be written as Extra-P JSON ({"parameters", "measurements"}) and
JSON Lines ({"params", "value", "callpath", "metric"} per repetition).
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

log2 = math.log2

POINTS_5 = (2, 4, 8, 16, 32)
POINTS_6 = (2, 4, 8, 16, 32, 64)
POINTS_7 = (1, 2, 4, 8, 16, 32, 64)
POINTS_LINEAR = (4, 8, 12, 16, 20, 24)
GRID_Q = (16, 32, 64, 128, 256)


@dataclass
class Block:
    """One REGION/METRIC block: values of `function(point_dict)`."""
    region: str
    metric: str
    function: Callable[[Dict[str, float]], float]


@dataclass
class Case:
    name: str
    parameters: List[str]
    points: List[Tuple[float, ...]]
    blocks: List[Block]
    repetitions: int = 5
    noise: float = 0.02          # relative half-width of the multiplicative noise
    seed: int = 0
    options: Dict[str, str] = field(default_factory=dict)   # modeler options to test with
    measure: Optional[str] = None                           # --measure to test with
    family: str = ""            # "weak" / "strong" / "" (used by the extrapolation bench)


def _fmt(value: float) -> str:
    return repr(float(value))


def _fmt_point(point: Sequence[float]) -> str:
    return " ".join(_fmt_coord(c) for c in point)


def _fmt_coord(c: float) -> str:
    return str(int(c)) if float(c).is_integer() else repr(float(c))


def sample(case: Case) -> List[List[List[float]]]:
    """The measured values: [block][point][repetition] (the same for every output format)."""
    rng = random.Random(case.seed)
    result = []
    for block in case.blocks:
        rows = []
        for pt in case.points:
            exact = block.function(dict(zip(case.parameters, pt)))
            rows.append([exact * (1.0 + rng.uniform(-case.noise, case.noise))
                         for _ in range(case.repetitions)])
        result.append(rows)
    return result


def render(case: Case) -> str:
    """The Extra-P text file of a case."""
    lines = []
    for p in case.parameters:
        lines.append(f"PARAMETER {p}")
    if len(case.parameters) == 1:
        lines.append("POINTS " + " ".join(_fmt_coord(pt[0]) for pt in case.points))
    else:
        lines.append("POINTS " + " ".join(f"( {_fmt_point(pt)} )" for pt in case.points))
    lines.append("")
    for block, rows in zip(case.blocks, sample(case)):
        lines.append(f"REGION {block.region}")
        lines.append(f"METRIC {block.metric}")
        for values in rows:
            lines.append("DATA " + " ".join(_fmt(v) for v in values))
        lines.append("")
    return "\n".join(lines)


def render_json(case: Case) -> str:
    """The same measurements in Extra-P's JSON format ("parameters" + "measurements")."""
    measurements: Dict[str, Dict[str, list]] = {}
    for block, rows in zip(case.blocks, sample(case)):
        entries = measurements.setdefault(block.region, {}).setdefault(block.metric, [])
        for pt, values in zip(case.points, rows):
            entries.append({"point": list(pt), "values": values})
    return json.dumps({"parameters": case.parameters, "measurements": measurements}, indent=1)


def render_legacy_json(case: Case, missing=()) -> str:
    """The measurements in Extra-P's legacy JSON layout (ids; one measurement per repetition).

    missing: (block index, point index) pairs left out, which Extra-P refuses
    (InvalidExperimentError): every callpath/metric must be measured at every coordinate.
    """
    regions = list(dict.fromkeys(b.region for b in case.blocks))
    metrics = list(dict.fromkeys(b.metric for b in case.blocks))
    document = {
        "parameters": [{"id": i + 1, "name": p} for i, p in enumerate(case.parameters)],
        "callpaths": [{"id": i + 1, "name": r} for i, r in enumerate(regions)],
        "metrics": [{"id": i + 1, "name": m} for i, m in enumerate(metrics)],
        "coordinates": [{"id": i + 1, "parameter_value_pairs": [{"parameter_id": k + 1, "parameter_value": v}
                                                                 for k, v in enumerate(pt)]}
                        for i, pt in enumerate(case.points)],
        "measurements": [],
    }
    for b, (block, rows) in enumerate(zip(case.blocks, sample(case))):
        for i, values in enumerate(rows):
            if (b, i) in missing:
                continue
            for v in values:
                document["measurements"].append({"id": len(document["measurements"]) + 1, "coordinate_id": i + 1,
                                                 "callpath_id": regions.index(block.region) + 1,
                                                 "metric_id": metrics.index(block.metric) + 1, "value": v})
    return json.dumps(document, indent=1)


def render_jsonl(case: Case) -> str:
    """The same measurements in Extra-P's JSON Lines format (one line per repetition)."""
    lines = []
    for block, rows in zip(case.blocks, sample(case)):
        for pt, values in zip(case.points, rows):
            params = dict(zip(case.parameters, pt))
            for v in values:
                lines.append(json.dumps({"params": params, "value": v, "callpath": block.region,
                                         "metric": block.metric}))
    return "\n".join(lines) + "\n"


_RENDER = {"txt": render, "json": render_json, "jsonl": render_jsonl}


def write_case(case: Case, directory, fmt: str = "txt") -> str:
    """Writes the case as DIRECTORY/NAME.txt (or .json, .jsonl); returns the path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(str(directory), f"{case.name}.{fmt}")
    with open(path, "w", encoding="utf-8") as f:
        f.write(_RENDER[fmt](case))
    return path


def _one(name, fn, points=POINTS_5, reps=5, noise=0.02, seed=None, family="", metric="time",
         region="main", **kw):
    seed = seed if seed is not None else (sum(map(ord, name)) * 7919) % 100003
    return Case(name=name, parameters=["p"], points=[(float(x),) for x in points],
                blocks=[Block(region, metric, fn)], repetitions=reps, noise=noise, seed=seed,
                family=family, **kw)


# --- single parameter -----------------------------------------------------------------------

def single_cases() -> List[Case]:
    s = math.sqrt
    return [
        _one("sp_linear", lambda d: 3 + 0.5 * d["p"], family="weak"),
        _one("sp_plogp", lambda d: 10 + 0.2 * d["p"] * log2(d["p"]), family="weak"),
        _one("sp_quadratic", lambda d: 0.01 * d["p"] ** 2, reps=4, noise=0.01, family="weak"),
        _one("sp_strong_inverse", lambda d: 2 + 100 / d["p"], family="strong"),
        _one("sp_sqrt", lambda d: 5 + 2 * s(d["p"]), reps=3, noise=0.05, family="weak"),
        _one("sp_constant_exact", lambda d: 42.0, noise=0.0),
        _one("sp_constant_noisy", lambda d: 5.0, noise=0.05),
        _one("sp_log_squared", lambda d: 1 + 0.3 * log2(d["p"]) ** 2, family="weak"),
        _one("sp_log", lambda d: 4 + 1.5 * log2(d["p"]), points=POINTS_6, family="weak"),
        _one("sp_p_1_5", lambda d: 20 + 0.1 * d["p"] ** 1.5, points=POINTS_6, family="weak"),
        _one("sp_cubic", lambda d: 1 + 1e-4 * d["p"] ** 3, reps=3, noise=0.01, family="weak"),
        _one("sp_cbrt", lambda d: 2 + 3 * d["p"] ** (1 / 3), noise=0.03, family="weak"),
        _one("sp_p23_logp", lambda d: 1 + 0.5 * d["p"] ** (2 / 3) * log2(d["p"]), points=POINTS_7,
             family="weak"),
        _one("sp_strong_comm", lambda d: 1 + 50 / d["p"] + 0.1 * log2(d["p"]), points=POINTS_6,
             family="strong"),
        _one("sp_amdahl", lambda d: 10 + 1000 / d["p"], reps=4, noise=0.03, family="strong"),
        _one("sp_p_5_4", lambda d: 3 + 0.2 * d["p"] ** 1.25, points=POINTS_7, family="weak"),
        _one("sp_bytes_large", lambda d: 1e9 + 1e6 * d["p"], noise=0.01, metric="bytes",
             family="weak"),
        _one("sp_seconds_small", lambda d: 1e-6 * d["p"], noise=0.04, family="weak"),
        _one("sp_p2_logp", lambda d: 0.05 * d["p"] ** 2 * log2(d["p"]), points=POINTS_6, reps=3,
             family="weak"),
        _one("sp_sqrtp_logp", lambda d: 7 + 0.4 * s(d["p"]) * log2(d["p"]), family="weak"),
        _one("sp_p_3_4", lambda d: 0.8 * d["p"] ** 0.75, noise=0.01, family="weak"),
        _one("sp_linear_points", lambda d: 2 + 0.3 * d["p"], points=POINTS_LINEAR, reps=4,
             family="weak"),
        _one("sp_strong_sqrt", lambda d: 0.5 + 40 / s(d["p"]), points=POINTS_6, family="strong"),
        _one("sp_noise_5pct", lambda d: 1 + 0.05 * d["p"], reps=3, noise=0.05, family="weak"),
        _one("sp_from_one", lambda d: 2 + d["p"] * log2(d["p"] + 1), points=POINTS_7, family="weak"),
        _one("sp_decreasing_log", lambda d: 30 - 3 * log2(d["p"]), points=POINTS_6, family="strong"),
    ]


# --- options (single and multi parameter) ---------------------------------------------------

def option_cases() -> List[Case]:
    neg = {"allow_negative_exponents": "True"}
    nolog = {"allow_log_terms": "False"}
    cases = [
        _one("opt_neg_strong", lambda d: 2 + 100 / d["p"], options=neg, family="strong"),
        _one("opt_neg_strong_sqrt", lambda d: 1 + 30 / math.sqrt(d["p"]), points=POINTS_6, options=neg,
             family="strong"),
        _one("opt_neg_weak", lambda d: 3 + 0.5 * d["p"], options=neg, family="weak"),
        _one("opt_neg_from_one", lambda d: 1 + 20 / d["p"], points=POINTS_7, options=neg,
             family="strong"),
        _one("opt_nolog_plogp", lambda d: 10 + 0.2 * d["p"] * log2(d["p"]), options=nolog),
        _one("opt_nolog_log", lambda d: 4 + 1.5 * log2(d["p"]), points=POINTS_6, options=nolog),
        _one("opt_poly_1_2", lambda d: 1 + 0.3 * d["p"] ** 2, options={"poly_exponents": "1,2"}),
        _one("opt_no_crossvalidation", lambda d: 5 + 2 * math.sqrt(d["p"]),
             options={"use_crossvalidation": "False"}),
        _one("opt_compare_rss", lambda d: 1 + 0.5 * d["p"] * log2(d["p"]),
             options={"compare_with_RSS": "True"}),
        _one("meas_median", lambda d: 3 + 0.5 * d["p"], noise=0.05, measure="median"),
        _one("meas_minimum", lambda d: 2 + 0.1 * d["p"] ** 1.5, noise=0.05, measure="minimum"),
        _grid("opt_mp_neg", lambda d: 1 + 100 * d["q"] / d["p"], options=neg),
        _grid("opt_mp_nolog", lambda d: 5 + 0.1 * d["p"] * log2(d["q"]), options=nolog),
        _grid("meas_mp_median", lambda d: 2 + 0.3 * d["p"] + 0.01 * d["q"], measure="median",
              noise=0.05),
    ]
    return cases


# --- two (and three) parameters -------------------------------------------------------------

def _grid(name, fn, ps=POINTS_5, qs=GRID_Q, reps=4, noise=0.02, seed=None, **kw):
    seed = seed if seed is not None else (sum(map(ord, name)) * 104729) % 100003
    points = [(float(p), float(q)) for p in ps for q in qs]
    return Case(name=name, parameters=["p", "q"], points=points, blocks=[Block("main", "time", fn)],
                repetitions=reps, noise=noise, seed=seed, **kw)


def multi_cases() -> List[Case]:
    s = math.sqrt
    sparse_points = ([(float(p), 16.0) for p in POINTS_5] +
                     [(2.0, float(q)) for q in GRID_Q[1:]] +
                     [(4.0, 32.0), (8.0, 64.0), (32.0, 256.0)])
    cases = [
        _grid("mp_p_logq", lambda d: 3 + 0.2 * d["p"] * log2(d["q"])),
        _grid("mp_p_plus_q2", lambda d: 1 + 0.5 * d["p"] + 0.001 * d["q"] ** 2),
        _grid("mp_pq", lambda d: 10 + 0.01 * d["p"] * d["q"]),
        _grid("mp_only_p", lambda d: 2 + 0.7 * d["p"]),
        _grid("mp_constant", lambda d: 12.0, noise=0.03),
        _grid("mp_sqrtp_q", lambda d: 4 + 0.05 * s(d["p"]) * d["q"]),
        _grid("mp_prod_plus_p", lambda d: 1 + 0.1 * d["p"] * log2(d["q"]) + 2 * d["p"]),
        _grid("mp_strong_q_over_p", lambda d: 0.5 + 3 * d["q"] / d["p"], reps=5),
        _grid("mp_logp_plus_q", lambda d: 6 + 2 * log2(d["p"]) + 0.05 * d["q"], reps=3,
              noise=0.04),
        _grid("mp_only_q_log", lambda d: 8 + 3 * log2(d["q"]) ** 2),
        Case(name="mp_sparse", parameters=["p", "q"], points=sparse_points,
             blocks=[Block("main", "time", lambda d: 2 + 0.3 * d["p"] * s(d["q"]))],
             repetitions=4, noise=0.02, seed=4242),
        Case(name="mp3_pqr", parameters=["p", "q", "r"],
             points=[(float(p), float(q), float(r)) for p in POINTS_5 for q in (2, 4, 8, 16, 32)
                     for r in (10, 20, 30, 40, 50)],
             blocks=[Block("main", "time", lambda d: 1 + 0.1 * d["p"] * log2(d["q"]) + 0.05 * d["r"])],
             repetitions=3, noise=0.02, seed=31337),
    ]
    return cases


# --- files with several REGION/METRIC blocks ------------------------------------------------

def multi_block_cases() -> List[Case]:
    s = math.sqrt
    sp_blocks = [
        Block("forward", "time", lambda d: 1 + 0.2 * d["p"]),
        Block("forward", "bytes", lambda d: 1e6 * d["p"] * log2(d["p"])),
        Block("backward", "time", lambda d: 2 + 0.4 * d["p"] ** 1.5),
        Block("backward", "bytes", lambda d: 5e5 + 1e3 * s(d["p"])),
        Block("allreduce", "time", lambda d: 0.1 + 0.05 * log2(d["p"]) ** 2),
        Block("allreduce", "bytes", lambda d: 4e6),
    ]
    mp_blocks = [
        Block("step", "time", lambda d: 1 + 0.02 * d["p"] * log2(d["q"])),
        Block("step", "bytes", lambda d: 1e3 * d["q"] + 10 * d["p"]),
        Block("io", "time", lambda d: 3 + 0.5 * s(d["p"])),
    ]
    return [
        Case(name="blocks_sp", parameters=["p"], points=[(float(x),) for x in POINTS_6],
             blocks=sp_blocks, repetitions=4, noise=0.02, seed=777),
        Case(name="blocks_mp", parameters=["p", "q"],
             points=[(float(p), float(q)) for p in POINTS_5 for q in GRID_Q],
             blocks=mp_blocks, repetitions=3, noise=0.02, seed=778),
    ]


# --- the point layouts of Extra-P's own tests (its tests/data), generated -----------------
#
# Where a multi-parameter modeler differs is in which points each fit uses: the single-parameter
# fits use the longest lines of points (find_best_measurement_points), the combined fit all
# points. These layouts exercise every branch of that selection: complete grids, a cross (one
# line per parameter; there c + a*t1 + b*t2, c + a*t1 + b*t1*t2 and c + a*t2 + b*t1*t2 are the
# same function, an exact tie), a band (a cross and a parallel line), a sparse diagonal band,
# an incomplete matrix (an L), 3 and 4 parameters on lines through a base point, with additive
# and multiplicative functions; and one-parameter data with a break (Extra-P's segmented
# examples, which its default modeler fits with one function).

def _shape(name, parameters, points, fn, reps=3, noise=0.02, **kw):
    seed = (sum(map(ord, name)) * 7907) % 100003
    return Case(name=name, parameters=list(parameters), points=[tuple(float(c) for c in pt) for pt in points],
                blocks=[Block("main", "time", fn)], repetitions=reps, noise=noise, seed=seed, **kw)


def _lines(base, axes):
    """Points on one line per parameter through `base` (axes[i]: the values of parameter i)."""
    points = [tuple(base)]
    for i, values in enumerate(axes):
        for v in values:
            pt = list(base)
            pt[i] = v
            if tuple(pt) not in points:
                points.append(tuple(pt))
    return points


P6 = (2, 4, 8, 16, 32, 64)
Q6 = (16, 32, 64, 128, 256, 512)


def layout_points():
    """name -> points of the two-parameter layouts (p, q)."""
    cross = _lines((8, 64), (P6, Q6))
    band = cross + [(16, q) for q in Q6[1:] if (16, q) not in cross]
    sparse = [(P6[i], Q6[j]) for i in range(6) for j in range(6) if abs(i - j) <= 1]
    incomplete = [(2, q) for q in Q6] + [(p, 16) for p in P6[1:3]]
    holes = [(p, q) for p in P6[:5] for q in Q6[:5] if (p, q) not in ((4, 32), (16, 64), (32, 256))]
    return {"cross": cross, "band": band, "sparse": sparse, "incomplete": incomplete, "holes": holes}


def layout_cases() -> List[Case]:
    s = math.sqrt
    functions = {
        "add": lambda d: 5 + 2 * log2(d["p"]) + 0.05 * d["q"],
        "mult": lambda d: 3 + 0.01 * d["p"] * d["q"],
        "mixed": lambda d: 1 + 0.2 * d["p"] * log2(d["q"]) + 0.5 * d["q"] ** 0.5,
        "strong": lambda d: 0.5 + 40 * s(d["q"]) / d["p"],
    }
    cases = []
    for layout, points in layout_points().items():
        for fname, fn in functions.items():
            cases.append(_shape(f"layout_{layout}_{fname}", "pq", points, fn))
    three = _lines((2, 2, 10), ((2, 4, 8, 16, 32), (2, 4, 8, 16, 32), (10, 20, 30, 40, 50)))
    three_band = three + [(4, q, 10) for q in (4, 8, 16, 32)]
    three_gap = [pt for pt in three_band if pt != (4, 2, 10)]
    for name, points in (("lines", three), ("band", three_band), ("band_gap", three_gap)):
        cases.append(_shape(f"layout3_{name}_xy_z", "pqr", points,
                            lambda d: 1 + 0.1 * d["p"] * log2(d["q"]) + 0.05 * d["r"]))
        cases.append(_shape(f"layout3_{name}_xyz", "pqr", points,
                            lambda d: 2 + 0.001 * d["p"] * d["q"] * d["r"]))
    cases.append(_shape("layout3_grid_xyz_x", "pqr",
                        [(p, q, r) for p in (2, 4, 8, 16) for q in (2, 4, 8, 16) for r in (10, 20, 30, 40)],
                        lambda d: 1 + 0.002 * d["p"] * d["q"] * d["r"] + 0.3 * d["p"]))
    four = _lines((2, 2, 2, 10), ((2, 4, 8, 16, 32),) * 3 + ((10, 20, 30, 40, 50),))
    cases.append(_shape("layout4_lines_add", "pqrs", four,
                        lambda d: 1 + 0.3 * d["p"] + 0.5 * log2(d["q"]) + 0.02 * d["r"] ** 2 + 0.1 * d["s"]))
    cases.append(_shape("layout4_lines_mult", "pqrs", four,
                        lambda d: 1 + 0.001 * d["p"] * d["q"] * log2(d["r"]) * d["s"]))
    cases.append(_shape("layout4_grid_mult", "pqrs",
                        [(p, q, r, t) for p in (2, 4, 8) for q in (2, 4, 8) for r in (2, 4, 8) for t in (10, 20, 30)],
                        lambda d: 1 + 0.01 * d["p"] * d["q"] * d["r"] + 0.1 * d["s"], reps=2))
    cases.append(_one("segmented_linear_then_flat", lambda d: 2 * d["p"] if d["p"] <= 16 else 32 + 0.1 * (d["p"] - 16),
                      points=(2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24)))
    cases.append(_one("segmented_flat_then_log", lambda d: 10 if d["p"] <= 8 else 10 + 4 * log2(d["p"] / 8),
                      points=(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)))
    return cases


def all_cases() -> List[Case]:
    return single_cases() + multi_cases() + multi_block_cases() + option_cases() + layout_cases()


# --- bench inputs ---------------------------------------------------------------------------

_BENCH_SHAPES = [
    lambda a, b: (lambda d: a + b * d["p"]),
    lambda a, b: (lambda d: a + b * d["p"] * log2(d["p"])),
    lambda a, b: (lambda d: a + b * 50 / d["p"]),
    lambda a, b: (lambda d: a + b * math.sqrt(d["p"])),
    lambda a, b: (lambda d: a + b * log2(d["p"]) ** 2),
    lambda a, b: (lambda d: a + b * 0.01 * d["p"] ** 2),
]

_BENCH_SHAPES_2 = [
    lambda a, b: (lambda d: a + b * d["p"] * log2(d["q"])),
    lambda a, b: (lambda d: a + b * d["p"] + 0.01 * b * d["q"]),
    lambda a, b: (lambda d: a + 0.01 * b * d["p"] * d["q"]),
    lambda a, b: (lambda d: a + b * math.sqrt(d["p"])),
]


def many_metrics_case(metrics: int, parameters: int = 1, repetitions: int = 5,
                      seed: int = 99) -> Case:
    """A file with `metrics` REGION/METRIC blocks (1 parameter: 5 points; 2: a 5x5 grid)."""
    rng = random.Random(seed)
    shapes = _BENCH_SHAPES if parameters == 1 else _BENCH_SHAPES_2
    blocks = []
    for i in range(metrics):
        a, b = rng.uniform(0.5, 5.0), rng.uniform(0.05, 2.0)
        blocks.append(Block(f"region_{i // 4}", f"metric_{i % 4}", shapes[i % len(shapes)](a, b)))
    if parameters == 1:
        points = [(float(x),) for x in POINTS_5]
        names = ["p"]
    else:
        points = [(float(p), float(q)) for p in POINTS_5 for q in GRID_Q]
        names = ["p", "q"]
    return Case(name=f"bench_{parameters}p_{metrics}m", parameters=names, points=points, blocks=blocks,
                repetitions=repetitions, noise=0.03, seed=seed)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: gen_extrap_inputs.py OUT_DIR", file=sys.stderr)
        return 2
    for case in all_cases():
        print(write_case(case, argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
