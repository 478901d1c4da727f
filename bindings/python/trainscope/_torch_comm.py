"""torch.distributed communication, timed (docs/auto.md, "Communication").

What ``trainscope.torch.instrument()`` (and so ``trainscope run --auto``) records
of the collectives, through the process's one recorder (trainscope._auto):

- ``COMM``: the time the calling thread spends in a collective it called from
  Python (``dist.all_reduce`` in the loop, ...): the steps room's ``comm`` phase,
  outside backward. A collective a DDP communication hook calls is no row of
  its own: the bucket's (below) times it. One called while FORWARD or BACKWARD
  is open (FSDP's all-gathers and reduce-scatters) is that phase's time: its
  ``COMM/`` row only.
- ``COMM/<op>/<group>`` (``COMM/all_reduce/world``): every collective, from the
  moment it is entered to its completion (for ``async_op=True``, when its work's
  future completes; where the backend gives no future, when the call returns),
  whoever called it: the loop, or DDP's gradient all-reduce of each bucket. The
  group is ``world`` for the default group, else ``group<name>`` (its
  torch name). The one-tensor forms (WHOLE: ``all_gather_into_tensor``,
  ``all_gather_single``, ``reduce_scatter_tensor``, ...) are the collective's
  ``all_gather``/``reduce_scatter``, their bytes the whole's; the run's tag
  TAG_BYTES + ``<op>/<group>`` has the sizes of one call seen. Recorded with
  the start and duration they had (the ``_core._RegionRing`` of the active
  run), so a collective completed on the backend's thread is timed all the
  same. They have no entry in the rank's summary file.
- ``COMM_EXPOSED``: per backward of a DistributedDataParallel model, the part of
  its gradient communication the step waits for: from the end of backward's
  compute (the last bucket entering its communication hook) to the completion
  of the last bucket (what ``backward()`` returns after, and the optimizer waits
  for). The all-reduce that ran while backward still computed is hidden
  (``COMM/all_reduce/<group>`` minus this). Per backward with reduce-scatters
  (FSDP's gradients, _ReduceScatters): the time backward's thread spends in those
  returning completed, plus the tail of those completing later.

DDP is timed through its communication hook. A model that registers its own
hook (PowerSGD, fp16 compression, any Python hook) keeps it: the hook is
wrapped at registration, never replaced, and its registration fails only where
it would have failed anyway. A model with no hook at its first forward gets
PyTorch's own default all-reduce hook (``default_hooks.allreduce_hook``: the
same averaging as the built-in one), wrapped; a hook registered after that
(``register_comm_hook``) replaces the inner one (PyTorch allows one
registration). A C++ built-in hook (``register_builtin_comm_hook``) cannot be
wrapped: its buckets are not timed (one warning).

``recent_collectives()`` gives the last 64 collectives of the process (op,
group, seq, bytes, entered, left: Unix seconds, left None while in flight), for
whoever asks which collective a rank is stuck in (issue 40's hang detection).
``seq`` counts the collectives of the group this process entered, from 0: the
n-th of a group is the same collective on every rank.
"""

import atexit
import collections
import functools
import inspect
import threading
import time

from trainscope._auto import BACKWARD, COMM, FORWARD, recorder

__all__ = ["COMM_EXPOSED", "COMM_PREFIX", "recent_collectives", "instrument_collectives",
           "instrument_ddp", "flush"]

COMM_EXPOSED = "COMM_EXPOSED"
COMM_PREFIX = "COMM/"
RECENT = 64

COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object",
               "all_gather_single", "_all_gather_base", "all_to_all", "all_to_all_single",
               "barrier", "broadcast", "broadcast_object_list", "gather", "gather_object",
               "reduce", "reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single",
               "_reduce_scatter_base", "scatter", "scatter_object_list", "send", "recv",
               "isend", "irecv")
# The one-tensor forms of a collective (FSDP's): the collective's name in the rows, and
# their bytes are the whole's (all-gather: its output; reduce-scatter: its input).
WHOLE = {"all_gather_into_tensor": "all_gather", "all_gather_single": "all_gather",
         "_all_gather_base": "all_gather", "reduce_scatter_tensor": "reduce_scatter",
         "reduce_scatter_single": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter"}
TAG_BYTES = "trainscope.comm.bytes."  # + <op>/<group>: the sizes of one call seen (bytes)

_rec = recorder()
_recent = collections.deque(maxlen=RECENT)  # the ring of recent_collectives()
_lock = threading.Lock()  # _recent, _seq, _pending
_seq = {}  # group name -> the next sequence number
# Regions timed on another thread (a bucket's completion), recorded by flush() on the
# step thread: (key, start monotonic ns, duration ns).
_pending = []
_in_hook = threading.local()  # depth of DDP hooks in progress on this thread
# Our future callbacks that torch has not released yet. Torch runs a future's Python
# callback on the thread that completes the future (gloo's worker, NCCL's) and releases it
# there once the next future of the chain is complete, which needs the GIL. A process group
# destroyed while the GIL is held (the last reference to a DDP model dropped as the function
# that held it returns, destroy_process_group) joins those threads: one still waiting for
# the GIL then waits forever (seen: 1 two-rank DDP job in about 25 on a loaded machine hung
# at exit). drain() lets them finish first.
_callbacks = {"made": 0, "released": 0}
_callbacks_lock = threading.Lock()
DRAIN_TIMEOUT_S = 2.0
_drain_registered = False  # drain() at exit
_ring = {"run": None, "ring": None}  # the active run's _RegionRing


class _Callback:
    """A future's callback of ours, counted until torch releases it (drain())."""

    __slots__ = ("_fn",)

    def __init__(self, fn):
        self._fn = fn
        with _callbacks_lock:
            _callbacks["made"] += 1

    def __call__(self, fut):
        return self._fn(fut)

    def __del__(self):
        with _callbacks_lock:
            _callbacks["released"] += 1


def _unreleased():
    with _callbacks_lock:
        return _callbacks["made"] - _callbacks["released"], _callbacks["made"]


def drain(timeout_s=DRAIN_TIMEOUT_S):
    """Waits (GIL released, at most timeout_s) until torch's communication threads have
    released our callbacks, then a little longer for the callbacks after ours in each chain
    (DDP's default hook divides by the world size in one). Called before a process group
    can be destroyed: a DDP model's finalizer, destroy_process_group, exit. Never raises."""
    try:
        pending, made = _unreleased()
        if made == 0:
            return
        deadline = time.monotonic() + timeout_s
        while pending > 0 and time.monotonic() < deadline:
            time.sleep(0.001)
            pending, _ = _unreleased()
        for _ in range(10):
            time.sleep(0.001)
    except Exception:  # pylint: disable=broad-except  (interpreter shutdown)
        pass


def recent_collectives():
    """The last 64 collectives of this process, oldest first: dicts with op, group,
    seq, bytes, entered and left (Unix seconds; left None while in flight)."""
    with _lock:
        return [{k: entry[k] for k in ("op", "group", "seq", "bytes", "entered", "left")}
                for entry in _recent]


def _group_name(dist, group):
    """'world' for the default group, else 'group<torch's name of it>'."""
    try:
        c10d = dist.distributed_c10d
        if group is None or group is getattr(dist.GroupMember, "WORLD", None) or \
                group is c10d._get_default_group():  # pylint: disable=protected-access
            return "world"
        name = getattr(group, "group_name", None)
        if name is None:
            name = getattr(c10d, "_pg_names", {}).get(group)
        return f"group{name}" if name is not None else f"group{id(group):x}"
    except Exception:  # pylint: disable=broad-except
        return "world" if group is None else "group"


def _nbytes(value):
    try:
        return int(value.numel()) * int(value.element_size())
    except Exception:  # pylint: disable=broad-except
        return 0


def _payload_bytes(bound, whole=False):
    """Bytes of a collective's input: its tensor arguments, else the tensors of its
    first list argument (object collectives: 0); `whole` (WHOLE's forms): its largest
    tensor (the gathered output, the input reduced)."""
    import torch  # pylint: disable=import-outside-toplevel
    if whole:
        return max([_nbytes(v) for v in bound.values() if isinstance(v, torch.Tensor)] or [0])
    total = 0
    first_list = None
    for name, value in bound.items():
        if isinstance(value, torch.Tensor):
            total += _nbytes(value)
        elif first_list is None and isinstance(value, (list, tuple)) and name != "group":
            first_list = value
    if total == 0 and first_list is not None:
        total = sum(_nbytes(t) for t in first_list if isinstance(t, torch.Tensor))
    return total


def _enter(op, group, nbytes):
    """A collective begins: its entry in the ring (kept and returned)."""
    entry = {"op": op, "group": group, "bytes": nbytes, "entered": time.time(), "left": None,
             "_start": time.monotonic_ns()}
    with _lock:
        entry["seq"] = _seq.get(group, 0)
        _seq[group] = entry["seq"] + 1
        _recent.append(entry)
    return entry


def _leave(entry, now_ns=None, record=True, grads=None, blocked=False):
    """A collective completed (on any thread): its ring entry and its COMM/ row; `grads`:
    a backward's _ReduceScatters it counts in (`blocked`: the call returned with it)."""
    now_ns = time.monotonic_ns() if now_ns is None else now_ns
    entry["left"] = time.time()
    if grads is not None:
        with _lock:
            grads.calls += 1
            if blocked:
                grads.blocked_ns += now_ns - entry["_start"]
            elif grads.last_entered is None or entry["_start"] > grads.last_entered:
                grads.last_entered = entry["_start"]
            if grads.last_left is None or now_ns > grads.last_left:
                grads.last_left = now_ns
    if record:
        _record(COMM_PREFIX + entry["op"] + "/" + entry["group"], entry["_start"],
                now_ns - entry["_start"])


def _region_ring():
    """The active run's _RegionRing, or None (no run: the rows are not recorded)."""
    # pylint: disable=import-outside-toplevel,protected-access
    if not _rec.enabled():
        return None
    from trainscope import _core, run as runs
    active = runs._active
    if active is None:
        _rec.live()  # under TRAINSCOPE_RUN_DIR the recorder's timer joins the run
        active = runs._active
        if active is None:
            return None
    if _ring["run"] is not active:
        old = _ring["ring"]
        if old is not None:
            old.release()
        _ring["run"], _ring["ring"] = active, _core._RegionRing(active._core)
    return _ring["ring"]


def _record(key, start_ns, duration_ns):
    try:
        ring = _region_ring()
        if ring is not None:
            ring.record(key, int(start_ns), max(int(duration_ns), 0))
    except Exception as error:  # pylint: disable=broad-except
        _rec.warn(("comm-record", key), f"trainscope: region {key!r} not recorded: {error}")


def flush():
    """Records what hooks timed on other threads (called after backward and at a DDP
    forward; never raises)."""
    with _lock:
        pending = _pending[:]
        del _pending[:]
    for key, start_ns, duration_ns in pending:
        _record(key, start_ns, duration_ns)


# --- collectives called from Python ---------------------------------------------------

class _ReduceScatters:
    """The reduce-scatters of the backward in progress (FSDP's gradients): what the step
    waits for of them. A call that returns when the collective completed (gloo; FSDP's
    sync calls) blocks backward's thread all the while: all of it is waited for. Of
    those completing later (async_op=True), the part after the last one began (the
    end of backward's compute), as DDP's buckets."""

    __slots__ = ("calls", "blocked_ns", "last_entered", "last_left")

    def __init__(self):
        self.calls = 0
        self.blocked_ns = 0  # the calls' own durations, summed
        self.last_entered = None
        self.last_left = None  # of those completing later; else of the calls

    def exposed(self):
        """(start, duration) of the COMM_EXPOSED row, or None."""
        if not self.calls or self.last_left is None:
            return None
        later = 0
        if self.last_entered is not None:
            later = max(self.last_left - self.last_entered - self.blocked_ns, 0)
        duration = self.blocked_ns + later
        return self.last_left - duration, duration


_reduce_scatters = _ReduceScatters()


_sizes = {}  # <op>/<group> -> the sizes of one call seen (TAG_BYTES)


def _note_size(op, group, nbytes):
    """TAG_BYTES + op/group: the sizes of one call seen, first 8 (set when one is new)."""
    seen = _sizes.setdefault(op + "/" + group, [])
    if nbytes in seen or len(seen) >= 8:
        return
    seen.append(nbytes)
    _rec.set_tag(TAG_BYTES + op + "/" + group, ", ".join(str(b) for b in seen))


def _make_collective(original, name, dist):
    try:
        signature = inspect.signature(original)
    except (TypeError, ValueError):
        signature = None
    op = WHOLE.get(name, name)

    @functools.wraps(original)
    def trainscope_timed_call(*args, **kwargs):  # trainscope's one frame: a timed call
        if getattr(_in_hook, "depth", 0) > 0:  # inside a DDP hook: the bucket's entry times it
            return original(*args, **kwargs)
        rec = _rec
        try:
            bound = signature.bind(*args, **kwargs).arguments if signature is not None else {}
            entry = _enter(op, _group_name(dist, bound.get("group")),
                           _payload_bytes(bound, name in WHOLE))
            # Inside forward or backward (FSDP's all-gathers and reduce-scatters) it is
            # that phase's time: its COMM/ row only, no COMM row.
            backward = rec.is_open(BACKWARD)
            in_phase = backward or rec.is_open(FORWARD)
            grads = _reduce_scatters if backward and op == "reduce_scatter" else None
            _note_size(op, entry["group"], entry["bytes"])
        except Exception:  # pylint: disable=broad-except  (a bad call: torch says why)
            return original(*args, **kwargs)
        started = False if in_phase else rec.start(COMM)
        completed_later = False
        try:
            result = original(*args, **kwargs)
            if result is not None and hasattr(result, "get_future"):  # async_op=True: a Work
                try:
                    result.get_future().then(_Callback(lambda fut: _leave(entry, grads=grads)))
                    completed_later = True
                except Exception:  # pylint: disable=broad-except  (no future: at return)
                    pass
            return result
        finally:
            if started:
                rec.end(COMM)
            if not completed_later:
                _leave(entry, grads=grads, blocked=True)
    return trainscope_timed_call


def instrument_collectives(handle):
    """Patches the torch.distributed collectives (undone by handle.remove()); True when
    any was."""
    try:
        import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    except Exception:  # pylint: disable=broad-except
        return False
    if not dist.is_available():
        return False
    _drain_at_exit()
    any_patched = False
    for name in COLLECTIVES:
        if hasattr(dist, name):
            # pylint: disable=protected-access
            any_patched = handle._patch(
                dist, name, functools.partial(_make_collective, name=name, dist=dist),
                f"torch.distributed.{name} (COMM)") or any_patched
    return any_patched


# --- DistributedDataParallel ----------------------------------------------------------

class _Backward:
    """The buckets of one DDP model's backward in progress."""

    __slots__ = ("last_entered", "last_left", "buckets")

    def __init__(self):
        self.last_entered = None
        self.last_left = None
        self.buckets = 0


class _TimedHook:
    """A DDP communication hook, timed: what DDP calls for each bucket."""

    def __init__(self, dist, group, state, hook):
        self.dist = dist
        self.group = group
        self.state = state
        self.hook = hook
        self.backward = _Backward()

    def __call__(self, state, bucket):
        del state  # self.state: a hook registered later replaces it (and the hook)
        try:
            entry = _enter("all_reduce", self.group, _nbytes(bucket.buffer()))
        except Exception:  # pylint: disable=broad-except
            return self.hook(self.state, bucket)
        backward = self.backward
        backward.buckets += 1
        if backward.last_entered is None or entry["_start"] > backward.last_entered:
            backward.last_entered = entry["_start"]
        _in_hook.depth = getattr(_in_hook, "depth", 0) + 1
        try:
            future = self.hook(self.state, bucket)
        finally:
            _in_hook.depth -= 1

        def done(fut):
            now = time.monotonic_ns()
            _leave(entry, now, record=False)
            with _lock:
                _pending.append((COMM_PREFIX + "all_reduce/" + self.group, entry["_start"],
                                 now - entry["_start"]))
                if backward.last_left is None or now > backward.last_left:
                    backward.last_left = now
            return fut.value()
        try:
            return future.then(_Callback(done))
        except Exception:  # pylint: disable=broad-except  (not a torch future: untimed)
            return future

    def backward_done(self):
        """After backward: its exposed communication as a pending COMM_EXPOSED row."""
        with _lock:
            backward, self.backward = self.backward, _Backward()
            if backward.buckets and backward.last_left is not None:
                _pending.append((COMM_EXPOSED, backward.last_entered,
                                 max(backward.last_left - backward.last_entered, 0)))


_hooks = []  # weak references to the _TimedHooks of live models (backward_done)


def backward_done():
    """Called after each backward: every DDP model's exposed part and that of the
    backward's reduce-scatters (FSDP), then flush()."""
    global _reduce_scatters  # pylint: disable=global-statement
    try:
        with _lock:
            done, _reduce_scatters = _reduce_scatters, _ReduceScatters()
            exposed = done.exposed()
            if exposed is not None:
                _pending.append((COMM_EXPOSED, exposed[0], exposed[1]))
        alive = []
        for ref in _hooks:
            hook = ref()
            if hook is not None:
                hook.backward_done()
                alive.append(ref)
        _hooks[:] = alive
    except Exception as error:  # pylint: disable=broad-except
        _rec.warn("comm-exposed", f"trainscope: COMM_EXPOSED not recorded: {error}")
    flush()


def _drain_at_exit():
    """drain() at exit too: the process groups still registered are destroyed after it."""
    global _drain_registered
    if not _drain_registered:
        _drain_registered = True
        atexit.register(drain)


def _install_finalizer(handle, ddp_class):
    """DistributedDataParallel.__del__ = drain (its reducer holds the process group; the
    class has none of its own), undone by handle.remove()."""
    if "__del__" in ddp_class.__dict__:
        return

    def __del__(model):  # pylint: disable=unused-argument
        drain()

    try:
        ddp_class.__del__ = __del__
    except Exception:  # pylint: disable=broad-except
        return

    def undo():
        if ddp_class.__dict__.get("__del__") is __del__:
            del ddp_class.__del__
    handle._add_undo(undo)  # pylint: disable=protected-access


def instrument_ddp(handle):
    """Times DistributedDataParallel's bucket all-reduces through its communication
    hook (undone by handle.remove() for models built later)."""
    import weakref  # pylint: disable=import-outside-toplevel
    try:
        import torch.distributed as dist  # pylint: disable=import-outside-toplevel
        from torch.nn.parallel import DistributedDataParallel  # pylint: disable=import-outside-toplevel
    except Exception:  # pylint: disable=broad-except
        return False
    if not dist.is_available():
        return False
    register = DistributedDataParallel.register_comm_hook

    def timed(model, state, hook):
        wrapper = _TimedHook(dist, _group_name(dist, getattr(model, "process_group", None)),
                             state, hook)
        try:
            # Its name and signature (DDP checks them), not its attributes (ours stay).
            functools.update_wrapper(wrapper, hook, updated=())
        except Exception:  # pylint: disable=broad-except
            pass
        _hooks.append(weakref.ref(wrapper))
        return wrapper

    def make_register(original):
        @functools.wraps(original)
        def register_comm_hook(model, state, hook):
            ours = model.__dict__.get("_trainscope_comm_hook")
            if ours is not None and ours.hook is not None and \
                    model.__dict__.get("_trainscope_comm_auto"):
                # Our default hook is in place (the model's first forward ran): the
                # job's hook replaces the inner one, as registering would have.
                model._check_comm_hook(hook)  # pylint: disable=protected-access
                ours.state, ours.hook = state, hook
                model.__dict__["_trainscope_comm_auto"] = False
                return None
            try:
                wrapper = timed(model, state, hook)
            except Exception:  # pylint: disable=broad-except
                return original(model, state, hook)
            result = original(model, state, wrapper)
            model.__dict__["_trainscope_comm_hook"] = wrapper
            return result
        return register_comm_hook

    def make_builtin(original):
        @functools.wraps(original)
        def register_builtin_comm_hook(model, comm_hook_type):
            model.__dict__["_trainscope_comm_hook"] = False  # ours cannot wrap it
            _rec.warn("comm-builtin", "trainscope: a built-in DDP communication hook "
                      f"({comm_hook_type}) runs in C++: its buckets are not timed")
            return original(model, comm_hook_type)
        return register_builtin_comm_hook

    def make_forward(original):
        @functools.wraps(original)
        def forward(model, *args, **kwargs):
            if "_trainscope_comm_hook" not in model.__dict__:
                model.__dict__["_trainscope_comm_hook"] = False
                try:
                    from torch.distributed.algorithms.ddp_comm_hooks import \
                        default_hooks  # pylint: disable=import-outside-toplevel
                    wrapper = timed(model, model.process_group, default_hooks.allreduce_hook)
                    register(model, model.process_group, wrapper)
                    model.__dict__["_trainscope_comm_hook"] = wrapper
                    model.__dict__["_trainscope_comm_auto"] = True
                except Exception as error:  # pylint: disable=broad-except
                    _rec.warn("comm-ddp", f"trainscope: DDP's all-reduce is not timed: {error}")
            backward_done()  # what an earlier backward left (a loop without our BACKWARD)
            return original(model, *args, **kwargs)
        return forward

    def make_destroy(original):
        @functools.wraps(original)
        def destroy_process_group(*args, **kwargs):
            drain()
            return original(*args, **kwargs)
        return destroy_process_group

    # pylint: disable=protected-access
    _drain_at_exit()
    _install_finalizer(handle, DistributedDataParallel)
    if hasattr(dist, "destroy_process_group"):
        handle._patch(dist, "destroy_process_group", make_destroy,
                      "torch.distributed.destroy_process_group (COMM)")
    ok = handle._patch(DistributedDataParallel, "register_comm_hook", make_register,
                       "DistributedDataParallel.register_comm_hook (COMM)")
    if ok:
        for name in ("register_builtin_comm_hook", "_register_builtin_comm_hook"):
            if hasattr(DistributedDataParallel, name):  # its name before torch 2
                handle._patch(DistributedDataParallel, name, make_builtin,
                              f"DistributedDataParallel.{name} (COMM)")
        ok = handle._patch(DistributedDataParallel, "forward", make_forward,
                           "DistributedDataParallel.forward (COMM)")
    return ok
