# trainscope's bootstrap for `trainscope run --auto` (docs/auto.md). The
# launcher writes this file as sitecustomize.py, with _trainscope_auto_hooks.py
# (auto_hooks.py) beside it, into a private directory that it puts first on
# PYTHONPATH, so every Python process the command starts (torchrun's workers
# included) loads it at start-up. When TRAINSCOPE_AUTO is on it imports the
# hooks (which act when the program imports torch, transformers' trainer or
# Lightning); then it runs the program's own sitecustomize, if there is one
# further on the path. Small on purpose: it is compiled at every start.
def _trainscope_start():
    import os
    import sys
    if os.environ.get("TRAINSCOPE_AUTO", "") not in ("", "0", "off"):
        try:
            import _trainscope_auto_hooks  # noqa: F401  (installs the hooks)
        except Exception as error:  # pylint: disable=broad-except
            sys.stderr.write(f"trainscope --auto: the import hooks failed: {error}\n")
    # The program's own sitecustomize, after the hooks (it may import torch), with
    # the import system's own classes (importlib.util would cost a millisecond).
    here = os.path.dirname(os.path.abspath(__file__))
    path = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    bootstrap = sys.modules.get("_frozen_importlib")
    external = sys.modules.get("_frozen_importlib_external")
    if bootstrap is None or external is None:  # not CPython
        import importlib.machinery as external  # pylint: disable=import-outside-toplevel
        import importlib.util as bootstrap  # pylint: disable=import-outside-toplevel
    spec = external.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = bootstrap.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        try:
            spec.loader.exec_module(module)
        except Exception:  # pylint: disable=broad-except  (as site.py: report, start anyway)
            import traceback  # pylint: disable=import-outside-toplevel
            sys.stderr.write("trainscope --auto: the program's own sitecustomize failed:\n")
            traceback.print_exc()


try:
    _trainscope_start()
except Exception as _ts_error:  # pylint: disable=broad-except
    import sys as _ts_sys
    _ts_sys.stderr.write(f"trainscope --auto: the bootstrap failed: {_ts_error}\n")
del _trainscope_start
