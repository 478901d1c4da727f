"""The package's namespace holds only its API: what `__all__` lists, the
submodules and dunder metadata; helpers and imported modules stay private."""
import types

import trainscope

SUBMODULES = {"run", "scaling", "torch", "keras", "diagnosis", "hf", "lightning"}


def public_names(module):
    return {name for name in dir(module) if not name.startswith("_")}


def test_every_public_name_is_in_all_or_a_submodule():
    extra = public_names(trainscope) - set(trainscope.__all__) - SUBMODULES
    assert not extra, f"trainscope exposes names outside __all__: {sorted(extra)}"


def test_no_imported_standard_module_leaks():
    leaked = [name for name in public_names(trainscope)
              if isinstance(getattr(trainscope, name), types.ModuleType) and name not in SUBMODULES]
    assert not leaked, leaked


def test_everything_in_all_exists():
    missing = [name for name in trainscope.__all__ if not hasattr(trainscope, name)]
    assert not missing, missing
    assert len(set(trainscope.__all__)) == len(trainscope.__all__)
