# trainscope's import hooks for `trainscope run --auto` (docs/auto.md), imported
# by its sitecustomize (auto_sitecustomize.py) when TRAINSCOPE_AUTO is on: when
# the program imports torch, trainscope instruments PyTorch
# (trainscope.torch.instrument); when it imports transformers' trainer or
# Lightning, every Trainer gets trainscope's callback; when it imports argparse,
# the first Namespace it parses becomes the run's params. It never imports any of
# them itself, and a hook that fails prints one line and leaves the program as
# it was.
import os as _ts_os
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


class _Loader:
    """The module's own loader, then _on_import()."""

    def __init__(self, loader, name):
        self._ts_loader = loader
        self._ts_name = name

    def create_module(self, spec):
        return self._ts_loader.create_module(spec)

    def exec_module(self, module):
        self._ts_loader.exec_module(module)
        _on_import(self._ts_name)

    def __getattr__(self, attribute):
        return getattr(self._ts_loader, attribute)


class _Finder:
    targets = ("torch", "transformers.trainer", "lightning.pytorch", "pytorch_lightning",
               "argparse")

    def __init__(self):
        self._busy = set()

    def find_spec(self, name, path=None, target=None):
        if name not in self.targets or name in self._busy:
            return None
        self._busy.add(name)
        try:
            for finder in _ts_sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.discard(name)
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, name)
        return spec


if not any(isinstance(finder, _Finder) for finder in _ts_sys.meta_path):
    _ts_sys.meta_path.insert(0, _Finder())
    if "argparse" in _ts_sys.modules:  # imported before the hooks (by the site's own code)
        _on_import("argparse")
