"""Each rank's evidence on request (`trainscope dump RUN`, `trainscope run --on-hang`).

install(run_dir, rank), called by start_run() and the --auto bootstrap's run, registers
faulthandler for trainscope's dump signal (SIGRTMIN+7, trainscope/launch/dump.hpp): on the
signal, every thread's Python stack is appended to <run>/dump-<rank>.txt from the signal
handler itself (it works while the GIL is held by a stuck call). A daemon thread sees the file
grow and writes <run>/dump-<rank>.json: every thread by name with its frames, the regions open
in the --auto recorder, and the recent collectives when trainscope._torch_comm records them.
Nothing of this runs on the training thread; it never raises into the training.
"""
import faulthandler
import json
import os
import signal
import sys
import threading
import time

from trainscope import _core

FORMAT = "trainscope.dump"
VERSION = 1
_POLL_S = 0.25

_state = None  # (pid, file) of the installation in this process


def dump_signal():
    return int(_core._DUMP_SIGNAL)  # pylint: disable=protected-access


def install(run_dir, rank):
    """Registers the dump handler for this process's rank; False when it cannot (said once)."""
    global _state
    if _state is not None and _state[0] == os.getpid():
        return True
    sig = dump_signal()
    try:
        current = signal.getsignal(sig)
    except (ValueError, OSError):
        current = None
    if current not in (signal.SIG_DFL, None):
        return False  # the program's own handler wins
    try:
        stacks = open(os.path.join(run_dir, f"dump-{rank}.txt"), "a",  # pylint: disable=consider-using-with
                      encoding="utf-8")
        faulthandler.register(sig, file=stacks, all_threads=True, chain=False)
    except (OSError, RuntimeError, ValueError) as error:
        sys.stderr.write(f"trainscope: no dump handler for rank {rank}: {error}\n")
        return False
    _state = (os.getpid(), stacks)
    thread = threading.Thread(target=_watch, args=(stacks, run_dir, rank),
                              name="trainscope-dump", daemon=True)
    thread.start()
    return True


def _watch(stacks, run_dir, rank):
    """Writes the JSON dump each time faulthandler appended stacks."""
    try:
        size = os.fstat(stacks.fileno()).st_size
    except OSError:
        return
    while True:
        time.sleep(_POLL_S)
        try:
            now = os.fstat(stacks.fileno()).st_size
        except OSError:
            return
        if now == size:
            continue
        size = now
        try:
            write_json(run_dir, rank)
        except Exception as error:  # pylint: disable=broad-except
            sys.stderr.write(f"trainscope: the dump of rank {rank} failed: {error}\n")


def _frames(frame):
    """The frames of a stack, innermost first."""
    out = []
    while frame is not None and len(out) < 200:
        code = frame.f_code
        out.append({"file": code.co_filename, "line": frame.f_lineno, "function": code.co_name})
        frame = frame.f_back
    return out


def snapshot(rank):
    """The dump document of this process (a dict)."""
    names = {t.ident: t for t in threading.enumerate()}
    me = threading.get_ident()
    threads = []
    for ident, frame in sys._current_frames().items():  # pylint: disable=protected-access
        if ident == me:
            continue  # the dump thread itself
        t = names.get(ident)
        threads.append({"name": t.name if t is not None else f"thread {ident}",
                        "main": t is threading.main_thread() if t is not None else False,
                        "frames": _frames(frame)})
    threads.sort(key=lambda t: (not t["main"], t["name"]))
    doc = {"format": FORMAT, "version": VERSION, "rank": int(rank), "pid": os.getpid(),
           "time_ms": int(time.time() * 1000), "threads": threads, "notes": []}
    auto = sys.modules.get("trainscope._auto")
    recorder = getattr(auto, "_recorder", None) if auto is not None else None
    if recorder is not None:
        doc["regions"] = sorted(str(k) for k in getattr(recorder, "_open", ()))
    comm = sys.modules.get("trainscope._torch_comm")
    recent = getattr(comm, "recent_collectives", None) if comm is not None else None
    if recent is not None:
        try:
            doc["collectives"] = [dict(c) for c in recent()]
        except Exception as error:  # pylint: disable=broad-except
            doc["notes"].append(f"recent_collectives() failed: {error}")
    else:
        doc["notes"].append("collective ring (issue 39) not present")
    return doc


def write_json(run_dir, rank):
    """dump-<rank>.json, replaced whole (a reader never sees half of it)."""
    path = os.path.join(run_dir, f"dump-{rank}.json")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(snapshot(rank), out, default=str)
    os.replace(tmp, path)
