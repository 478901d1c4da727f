# trainscope's import hooks for `trainscope run --auto` (docs/auto.md), imported
# by its sitecustomize (auto_sitecustomize.py) when TRAINSCOPE_AUTO is on: when
# the program imports torch, trainscope instruments PyTorch
# (trainscope.torch.instrument); when it imports transformers' trainer or
# Lightning, every Trainer gets trainscope's callback; when it imports argparse,
# the first Namespace it parses becomes the run's params. It never imports any of
# them itself, and a hook that fails prints one line and leaves the program as
# it was. This file follows bindings/python/trainscope/_import_hook.py (ImportHook)
# in the bootstrap's _trainscope_auto_hooks.py.
import sys as _ts_sys


def _say(message):
    _ts_sys.stderr.write(f"trainscope --auto: {message}\n")


def _on_import(name):
    try:
        if name == "torch":
            from trainscope import _auto, _torch_auto  # pylint: disable=import-outside-toplevel
            settings = _auto.auto_mode() or {"layers": 0}
            _torch_auto.instrument(layers=settings["layers"])
        elif name == "argparse":
            from trainscope import _auto  # pylint: disable=import-outside-toplevel
            _auto.record_argparse()
        elif name == "transformers.trainer":
            from trainscope import hf  # pylint: disable=import-outside-toplevel
            hf.install()
        else:  # lightning.pytorch, pytorch_lightning
            from trainscope import lightning  # pylint: disable=import-outside-toplevel
            lightning.install()
    except ImportError as error:
        _say(f"{name} is not instrumented: the trainscope module cannot be imported here "
             f"({error}; {_ts_sys.executable})")
    except Exception as error:  # pylint: disable=broad-except
        _say(f"{name} is not instrumented: {error}")


_TARGETS = ("torch", "transformers.trainer", "lightning.pytorch", "pytorch_lightning",
            "argparse")

_TS_NAMES = frozenset(_TARGETS)
if not any(getattr(finder, "names", None) == _TS_NAMES for finder in _ts_sys.meta_path):
    ImportHook(_TARGETS, lambda name, _module: _on_import(name)).install()
    if "argparse" in _ts_sys.modules:  # imported before the hooks (by the site's own code)
        _on_import("argparse")
