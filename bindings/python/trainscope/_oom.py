"""A CUDA memory snapshot on out-of-memory (issue 40, GPU only).

install(run_dir, rank, history) attaches an observer to PyTorch's caching allocator
(torch._C._cuda_attach_out_of_memory_observer, PyTorch >= 2.1): when an allocation fails,
before the OutOfMemoryError propagates, torch.cuda.memory._snapshot() is pickled into
<run>/oom-snapshot-r<rank>.pickle (open it at https://pytorch.org/memory_viz). With
history (`trainscope run --auto=memory`), torch.cuda.memory._record_memory_history() is on
from install, so the snapshot holds each block's allocation stack. Without CUDA, or a
PyTorch without the observer, install() does nothing and says why (returns the reason).
"""
import os
import pickle
import sys

_installed = None  # the pid it was installed in


def snapshot_name(rank):
    return f"oom-snapshot-r{int(rank)}.pickle"


def install(run_dir, rank, history=False):
    """Attaches the observer once per process; None when attached, else why not."""
    global _installed
    if _installed == os.getpid():
        return None
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError:
        return "no torch"
    if not torch.cuda.is_available():
        return "no CUDA device"
    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)  # pylint: disable=protected-access
    if attach is None:
        return f"torch {torch.__version__} has no out-of-memory observer (needs >= 2.1)"
    path = os.path.join(os.fspath(run_dir), snapshot_name(rank))

    def observer(device, alloc, device_alloc, device_free):  # pylint: disable=unused-argument
        try:
            snapshot = torch.cuda.memory._snapshot()  # pylint: disable=protected-access
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as out:
                pickle.dump(snapshot, out)
            os.replace(tmp, path)
            sys.stderr.write(f"trainscope: CUDA out of memory on device {device} (asked "
                             f"{alloc} bytes, {device_free} free): snapshot in {path}\n")
        except Exception as error:  # pylint: disable=broad-except
            sys.stderr.write(f"trainscope: no OOM snapshot: {error}\n")

    if history:
        try:
            torch.cuda.memory._record_memory_history(max_entries=100000)  # pylint: disable=protected-access
        except Exception as error:  # pylint: disable=broad-except
            sys.stderr.write(f"trainscope: no CUDA allocation history: {error}\n")
    attach(observer)
    _installed = os.getpid()
    return None
