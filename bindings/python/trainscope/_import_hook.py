# The one import hook of trainscope: `trainscope.hf.install()` waits with it for
# transformers' trainer, and the bootstrap of `trainscope run --auto` (whose
# _trainscope_auto_hooks.py is this file followed by src/launch/auto_hooks.py,
# cmake/TrainscopeEmbeddedTexts.cmake) for torch, the Trainers and argparse.
# Standard library only: the bootstrap loads it before trainscope is imported.
import sys as _ts_sys
import threading as _ts_threading


class ImportHook:
    """A meta path finder that calls ``after(name, module)`` right after a module in
    `names` is executed, without importing it; ``after`` must not raise (what it
    raises is dropped: the program's import goes on)."""

    def __init__(self, names, after):
        self.names = frozenset(names)
        self.after = after
        self._busy = _ts_threading.local()  # the names this thread is looking up

    def install(self):
        if self not in _ts_sys.meta_path:
            _ts_sys.meta_path.insert(0, self)
        return self

    def remove(self):
        try:
            _ts_sys.meta_path.remove(self)
        except ValueError:
            pass

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.names:
            return None
        busy = self._busy.__dict__.setdefault("names", set())
        if fullname in busy:
            return None
        busy.add(fullname)
        try:
            spec = None
            for finder in list(_ts_sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        except Exception:  # pylint: disable=broad-except
            return None  # let the import system look as it would without us
        finally:
            busy.discard(fullname)
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _AfterExec(spec.loader, fullname, self.after)
        return spec


class _AfterExec:
    """The module's own loader (put back on the module), then after(name, module)."""

    def __init__(self, loader, name, after):
        self._ts_loader = loader
        self._ts_name = name
        self._ts_after = after

    def create_module(self, spec):
        return self._ts_loader.create_module(spec)

    def exec_module(self, module):
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._ts_loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._ts_loader
        self._ts_loader.exec_module(module)
        try:
            self._ts_after(self._ts_name, module)
        except Exception:  # pylint: disable=broad-except
            pass

    def __getattr__(self, attribute):
        return getattr(self._ts_loader, attribute)
