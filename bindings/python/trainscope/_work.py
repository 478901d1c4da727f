"""The work of each step (docs/ledger.md): samples and tokens per step, and the
FLOPs of one step, recorded into the run under the names of
trainscope/run/step_work.hpp (the C++ writer, bound as ``_core._Run.log_step_work``
and ``log_step_flops``).

Under ``trainscope run --auto`` (and ``trainscope.torch.instrument()``), the
outermost training call of a module that owns parameters (FORWARD) hands its
inputs to ``StepWork.batch``: the leading dimension of the first tensor input is
the step's samples; an integer tensor of two dimensions or more is tokens, batch
x sequence, or the sum of the ``attention_mask`` given beside it (padding
excluded). A step's work is the sum over its forwards (gradient accumulation's
micro-batches, under the Hugging Face or Lightning callbacks too), logged when
the step (BATCH) ends, at the process's step index (0, 1, ...). A mask on the GPU
is summed there and read back once every 64 steps (no host sync per step).

The FLOPs of one step are counted once, on the step after WARMUP_STEPS steps (in
the diagnosis's warm-up), with torch.utils.flop_counter.FlopCounterMode (torch
>= 2.1), forward and backward; where that cannot be done the run's tag
TAG_FLOPS says why (torch 1.13 has no FlopCounterMode). TRAINSCOPE_FLOPS=off
leaves the count out.

Under the Hugging Face Trainer and Lightning (trainscope.hf, trainscope.lightning)
the framework hands each training micro-batch in instead (``framework_batch``:
the Trainer's ``training_step`` inputs; Lightning's batch, its samples by
Lightning's own ``extract_batch_size``), and the forwards are not counted then
(a training_step that calls two modules would count its samples twice); the
Trainer's own token count (``state.num_input_tokens_seen``, when
``include_num_input_tokens_seen`` is on) replaces the batches' tokens
(``framework_step_tokens``). The run's tag SOURCE_TAG says where the figures
came from.

``trainscope.log_step_work(samples=, tokens=)`` and
``trainscope.log_step_flops(flops)`` are the user's: once a user logs work, the
automatic count of that process stops (one writer per step).
"""

import atexit
import hashlib
import json
import os
import socket
import time
from collections.abc import Mapping

from trainscope import _core

WARMUP_STEPS = 3  # steps before the one whose FLOPs are counted
_READ_BACK = 64  # steps whose GPU token counts wait to be read at once
TAG_FLOPS = _core._FLOPS_NOTE_TAG  # why the FLOPs were not counted (a tag)
SOURCE_TAG = _core._WORK_SOURCE_TAG  # where the samples and tokens come from (a tag)
MODEL_INPUTS = "the model's inputs"  # the forwards' (FORWARD), the default source
_FLOPS_ENV = "TRAINSCOPE_FLOPS"


def _core_run():
    """The active run's _core._Run (a run of TRAINSCOPE_RUN_DIR is joined)."""
    from trainscope import run as runs  # pylint: disable=import-outside-toplevel
    return runs._implicit_run()._core  # pylint: disable=protected-access


def log_step_work(samples=None, tokens=None, step=None):
    """The work of one step, given by the user: samples and/or tokens, at `step`
    (default: the previous step + 1). From then on, the automatic count of this
    process logs none (one writer per step)."""
    work().user = True
    _core_run().log_step_work(samples=None if samples is None else float(samples),
                              tokens=None if tokens is None else float(tokens), step=step)


def log_step_flops(flops):
    """The FLOPs of one training step (forward and backward), given by the user:
    a param of the run (written once); no count is made then."""
    work().flops_done = True
    _core_run().log_step_flops(float(flops), "user")


def ledger(run_dir, peak_flops=None, price_per_kwh=None, price_per_hour=None,
           grams_co2_per_kwh=None):
    """The run's efficiency ledger (C++ steps::read_ledger, docs/ledger.md) as a dict:
    steps, samples_per_s, tokens_per_s, flops_per_step, achieved_flops, peak_flops,
    peak_source, device, dtype, mfu, seconds, energy_j (cpu_energy_j from RAPL plus
    gpu_energy_j from NVML over `gpus` GPUs), energy_per_step_j,
    energy_per_1k_tokens_j, cost, co2_g (NaN where unknown), notes (why), line (as
    `trainscope diagnose` prints it) and ranks (the rates per rank). peak_flops: one
    device's peak FLOP/s, over the table and the probe; the prices and the CO2 per
    kWh give the derived figures (never defaults)."""
    def number(value):
        return None if value is None else float(value)
    return _core._read_ledger(  # pylint: disable=protected-access
        os.fspath(run_dir), number(peak_flops), number(price_per_kwh), number(price_per_hour),
        number(grams_co2_per_kwh))


def first_tensor(torch, value):
    """The first tensor in `value` (a tensor, or nested tuples, lists and dicts), or None."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        for item in value:
            found = first_tensor(torch, item)
            if found is not None:
                return found
    elif isinstance(value, (dict, Mapping)):  # (a Hugging Face BatchEncoding: a UserDict)
        for item in value.values():
            found = first_tensor(torch, item)
            if found is not None:
                return found
    return None


def _mask_of(torch, args, kwargs):
    mask = kwargs.get("attention_mask")
    if mask is None:
        for value in args:
            if isinstance(value, (dict, Mapping)):
                mask = value.get("attention_mask")
                break
    return mask if isinstance(mask, torch.Tensor) else None


def batch_work(torch, args, kwargs):
    """(samples, tokens) of a model's inputs: tokens None for non-integer
    inputs, a 0-d tensor when summed from a mask (not read back)."""
    samples, tokens, _ = _batch_work(torch, args, kwargs)
    return samples, tokens


def _batch_work(torch, args, kwargs):
    """batch_work's (samples, tokens) and how the tokens were counted (None, or
    "attention_mask", or "ids" for batch x sequence)."""
    first = first_tensor(torch, args)
    if first is None:
        first = first_tensor(torch, kwargs)
    if first is None or first.dim() == 0:
        return None, None, None
    samples = int(first.shape[0])
    if first.dim() < 2 or first.is_floating_point() or first.is_complex() or \
            first.dtype == torch.bool:
        return samples, None, None
    mask = _mask_of(torch, args, kwargs)
    if mask is not None and tuple(mask.shape[:2]) == tuple(first.shape[:2]):
        tokens = mask.sum()  # on a GPU: no sync here (read back every _READ_BACK steps)
        return samples, (int(tokens) if tokens.device.type == "cpu" else tokens), \
            "attention_mask"
    return samples, samples * int(first.shape[1]), "ids"


class StepWork:
    """The books of one process's step work (under --auto)."""

    def __init__(self):
        self.user = False  # the user logs work: nothing automatic
        self.flops_done = False  # counted, given, or found impossible
        self.step = 0  # the next step's index
        self._samples = 0
        self._tokens = 0  # an int, or a device tensor (a sum not read back)
        self._has_tokens = False
        self._pending = []  # (step, samples, tokens tensor or int or None)
        self._counter = None  # the FlopCounterMode of the step being counted
        self._counted_step = None
        self._dtype = None  # of the matrix products in the counted step
        self._exit_hook = False
        # A framework that hands the batches in (framework_batch): its name, the
        # samples' source; the forwards are not counted meanwhile.
        self.owner = None
        self._counted = None  # how this step's tokens were counted ("ids", "attention_mask")
        self._step_tokens = None  # (tokens, source): the framework's count of this step
        self._source = None  # SOURCE_TAG's value as set

    def batch(self, torch, module, args, kwargs):
        """The inputs of a training forward (outermost, a module with parameters)."""
        if self._counter is not None and self._dtype is None:
            self._dtype = _dtype_in_use(torch, module)
        if self.user or self.owner is not None:
            return
        self._count(torch, args, kwargs, None)

    def framework_batch(self, owner, batch, samples=None):
        """A training micro-batch as the framework `owner` ("the Lightning batch")
        sees it; `samples`: the framework's own batch size (else the first tensor's
        leading dimension). The forwards are not counted until release(owner)."""
        if self.user:
            return
        if self.owner != owner:  # (what forwards counted of this step is left out)
            self.owner = owner
            self._samples, self._tokens, self._has_tokens, self._counted = 0, 0, False, None
        import torch  # pylint: disable=import-outside-toplevel
        self._count(torch, (batch,), {}, samples)

    def framework_step_tokens(self, tokens, source):
        """The tokens of the step about to end, as the framework counted them
        (the Trainer's num_input_tokens_seen): they replace the batches' count."""
        self._step_tokens = (tokens, source)

    def release(self, owner):
        """The framework `owner` hands no more batches in (its training ended)."""
        if self.owner == owner:
            self.owner = None

    def _count(self, torch, args, kwargs, samples_given):
        try:
            samples, tokens, counted = _batch_work(torch, args, kwargs)
        except Exception as error:  # pylint: disable=broad-except
            from trainscope._auto import recorder  # pylint: disable=import-outside-toplevel
            recorder().warn("batch-work", f"trainscope: the work of a batch not counted: {error}")
            return
        if samples_given is not None:
            samples = int(samples_given)
        if samples is None:
            return
        self._samples += samples
        if tokens is not None:
            self._tokens = self._tokens + tokens
            self._has_tokens = True
            self._counted = counted if self._counted in (None, counted) else "ids, attention_mask"

    def step_ended(self, rec):
        """BATCH ended: the step's work is logged (or queued while on the GPU)."""
        step = self.step
        self.step += 1
        if self._counter is not None:
            self._flops_counted(rec)
        elif not self.flops_done and self.step == WARMUP_STEPS:
            self._count_next_step(rec)
        step_tokens, self._step_tokens = self._step_tokens, None
        if self.user or not self._samples:
            return
        samples, tokens = self._samples, (self._tokens if self._has_tokens else None)
        origin = self.owner or MODEL_INPUTS
        tokens_source = None if tokens is None else f"{origin}: {self._counted}"
        if step_tokens is not None:
            tokens, tokens_source = step_tokens
        self._samples, self._tokens, self._has_tokens, self._counted = 0, 0, False, None
        self._say_source(rec, f"samples: {origin}; tokens: {tokens_source or 'none'}")
        self._pending.append((step, samples, tokens))
        if tokens is None or isinstance(tokens, (int, float)) or \
                len(self._pending) >= _READ_BACK:
            self.flush(rec)
        elif not self._exit_hook:
            self._exit_hook = True
            atexit.register(self.flush, rec)  # before the run's own (registered earlier)

    def _say_source(self, rec, source):
        if source != self._source:
            self._source = source
            rec.set_tag(SOURCE_TAG, source)

    def flush(self, rec):
        pending, self._pending = self._pending, []
        for step, samples, tokens in pending:
            try:
                run = _core_run()
                run.log_step_work(samples=float(samples),
                                  tokens=None if tokens is None else float(tokens), step=step)
            except Exception as error:  # pylint: disable=broad-except
                rec.warn("step-work", f"trainscope: the work of a step not logged: {error}")
                return

    # FLOPs of one step ---------------------------------------------------------
    def _count_next_step(self, rec):
        if os.environ.get(_FLOPS_ENV, "").lower() in ("0", "off", "no"):
            self.flops_done = True
            rec.set_tag(TAG_FLOPS, f"not counted: {_FLOPS_ENV}=off")
            return
        self.flops_done = True  # one try per process
        try:
            from torch.utils.flop_counter import \
                FlopCounterMode  # pylint: disable=import-outside-toplevel
        except ImportError:
            import torch  # pylint: disable=import-outside-toplevel
            rec.set_tag(TAG_FLOPS, f"not counted: torch {torch.__version__} has no "
                                   f"torch.utils.flop_counter.FlopCounterMode (torch >= 2.1)")
            return
        try:
            counter = FlopCounterMode(display=False)
            counter.__enter__()
            self._counter = counter
            self._counted_step = self.step
        except Exception as error:  # pylint: disable=broad-except
            rec.set_tag(TAG_FLOPS, f"not counted: FlopCounterMode failed: {error}")

    def _flops_counted(self, rec):
        counter, self._counter = self._counter, None
        try:
            counter.__exit__(None, None, None)
            flops = float(counter.get_total_flops())
        except Exception as error:  # pylint: disable=broad-except
            rec.set_tag(TAG_FLOPS, f"not counted: FlopCounterMode failed: {error}")
            return
        if flops <= 0:
            rec.set_tag(TAG_FLOPS, "not counted: FlopCounterMode saw no operation it counts")
            return
        try:
            import torch  # pylint: disable=import-outside-toplevel
            run = _core_run()
            run.log_step_flops(flops, "FlopCounterMode")
            params = {_core._STEP_FLOPS_STEP_PARAM: str(self._counted_step)}
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                params[_core._STEP_DEVICE_PARAM] = torch.cuda.get_device_name(
                    torch.cuda.current_device())
            else:
                params[_core._STEP_DEVICE_PARAM] = "cpu"
                peak, source = cpu_gemm_peak(torch)
                params[_core._PEAK_FLOPS_PARAM] = f"{peak:.6g}"
                params[_core._PEAK_SOURCE_PARAM] = source
            params[_core._STEP_DTYPE_PARAM] = self._dtype or "fp32"
            rec.log_params(params)
        except Exception as error:  # pylint: disable=broad-except
            rec.set_tag(TAG_FLOPS, f"not recorded: {error}")


def _dtype_in_use(torch, module):
    """The data type of the matrix products of `module`'s call: autocast's when
    on, else its first floating parameter's; fp32 on a GPU that allows TF32 is
    tf32 (names of trainscope/hardware/gpu/peak_flops.hpp)."""
    names = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
    try:
        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        if cuda and torch.is_autocast_enabled():
            return names.get(torch.get_autocast_gpu_dtype(), "fp32")
        if not cuda and getattr(torch, "is_autocast_cpu_enabled", lambda: False)():
            return names.get(torch.get_autocast_cpu_dtype(), "fp32")
        dtype = next((p.dtype for p in module.parameters() if p.is_floating_point()),
                     torch.float32)
        name = names.get(dtype, str(dtype).replace("torch.", ""))
        if name == "fp32" and cuda and torch.backends.cuda.matmul.allow_tf32:
            return "tf32"
        return name
    except Exception:  # pylint: disable=broad-except
        return None


def _cache_dir():
    """trainscope's cache (as the pip freeze's: src/launch/pip_freeze.cpp)."""
    for variable, suffix in (("TRAINSCOPE_CACHE_DIR", ""), ("XDG_CACHE_HOME", "/trainscope"),
                             ("HOME", "/.cache/trainscope")):
        value = os.environ.get(variable)
        if value:
            return value + suffix
    return None


def _cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as lines:
            for line in lines:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return "unknown CPU"


_PROBE_SIZE = 1024


def _probe_gemm(torch, repeats):
    """The best FLOP/s of `repeats` fp32 matmuls of two 1024 x 1024 matrices."""
    with torch.no_grad():
        a = torch.randn(_PROBE_SIZE, _PROBE_SIZE)
        b = torch.randn(_PROBE_SIZE, _PROBE_SIZE)
        out = torch.empty(_PROBE_SIZE, _PROBE_SIZE)
        torch.mm(a, b, out=out)  # warm-up
        best = float("inf")
        for _ in range(repeats):
            begun = time.perf_counter()
            torch.mm(a, b, out=out)
            best = min(best, time.perf_counter() - begun)
    return 2.0 * _PROBE_SIZE ** 3 / best


def cpu_gemm_peak(torch, repeats=5, recheck=2):
    """The CPU's measured GEMM peak FLOP/s with torch (fp32 matmul of two
    1024 x 1024 matrices at the process's thread count, the best of `repeats`),
    cached per host, CPU, torch version and thread count in trainscope's cache:
    (flops, source). A probe taken while the machine was busy reads low, and MFU
    against it high: with a cached figure, a short probe (`recheck` matmuls) runs
    too, and the best of both is the peak and the cache's figure."""
    threads = torch.get_num_threads()
    signature = f"{socket.gethostname()}|{_cpu_model()}|torch {torch.__version__}|{threads}"
    source = f"cpu GEMM probe (torch.mm fp32 {_PROBE_SIZE}, {threads} threads)"
    directory = _cache_dir()
    path = None
    cached = None
    if directory:
        digest = hashlib.sha256(signature.encode()).hexdigest()[:16]
        path = os.path.join(directory, f"cpu-gemm-peak-{digest}.json")
        try:
            with open(path, encoding="utf-8") as cached_file:
                entry = json.load(cached_file)
            if entry.get("signature") == signature and entry.get("flops", 0) > 0:
                cached = float(entry["flops"])
        except (OSError, ValueError, TypeError, AttributeError):
            pass
    fresh = _probe_gemm(torch, repeats if cached is None else recheck)
    if cached is not None and cached >= fresh:
        return cached, source + ", cached"
    if path:
        try:
            os.makedirs(directory, exist_ok=True)
            temporary = f"{path}.{os.getpid()}.tmp"
            with open(temporary, "w", encoding="utf-8") as out_file:
                json.dump({"signature": signature, "flops": fresh}, out_file)
            os.replace(temporary, path)
        except OSError:
            pass  # a cache that cannot be written costs the next run a probe
    return fresh, source


_work = None


def work():
    """The process's StepWork."""
    global _work
    if _work is None:
        _work = StepWork()
    return _work
