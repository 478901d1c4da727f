"""How TrainscopeCallback gets to a Trainer, for tests/python/test_lightning.py: the
entry-point factories, install()/remove(), two callbacks in one Trainer, a hook
that fails, the data wait timed through the profiler (the fallback where the
loops lack their fetch bracket). Prints one JSON object of what it saw.

    python lightning_attach.py ROOT     (TRAINSCOPE_AUTO on or off; ROOT: a scratch dir)

The test puts a distribution with trainscope's entry points (as pyproject.toml
declares them) on the path, so Lightning loads the factories as from an
installed trainscope.
"""

import json
import os
import sys
import warnings

import torch


def count(trainer, hooks):
    return sum(isinstance(cb, hooks) for cb in trainer.callbacks)


def bare_trainer(pl, root, **kwargs):
    return pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, accelerator="cpu", devices=1,
                      default_root_dir=root, **kwargs)


def fit(pl, root, callbacks, max_steps=4, validate=False):
    from torch.utils.data import DataLoader, TensorDataset

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
    val = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=4)
    trainer = bare_trainer(pl, root, max_steps=max_steps, callbacks=callbacks,
                           num_sanity_val_steps=0, limit_val_batches=2 if validate else 0)
    trainer.fit(Tiny(), data, val if validate else None)
    return trainer


def where_fetches_are_timed(pl):
    """A callback noting, in a training batch, which of the fetch brackets is wrapped."""
    class Probe(pl.Callback):
        seen = None

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            Probe.seen = {"loops": "_on_before_fetch" in vars(trainer.fit_loop.epoch_loop),
                          "profiler": "start" in vars(trainer.profiler)}

    return Probe


def cpu_counts(run_dir):
    import trainscope
    regions = trainscope.read_run(run_dir).regions
    regions = regions[regions.device == "CPU"]
    return {str(k): int(n) for k, n in regions.key.value_counts().items() if n}


def main():
    root = sys.argv[1]
    warnings.filterwarnings("ignore")
    import trainscope
    import trainscope.lightning as tl
    warnings.filterwarnings("always", category=trainscope.TrainscopeWarning)
    import lightning.pytorch as lpl
    import pytorch_lightning as ppl

    seen = {"auto": os.environ.get("TRAINSCOPE_AUTO")}
    # The factories themselves.
    made = tl.lightning_callbacks_factory()
    seen["factory_lightning"] = [type(cb).__bases__[-1].__module__ for cb in made]
    made = tl.pytorch_lightning_callbacks_factory()
    seen["factory_pytorch_lightning"] = [type(cb).__bases__[-1].__module__ for cb in made]
    # Lightning's own loading of the entry points (callback_connector), both packages.
    seen["entry_point_lightning"] = count(bare_trainer(lpl, root), tl._Hooks)
    seen["entry_point_pytorch_lightning"] = count(bare_trainer(ppl, root), tl._Hooks)
    seen["entry_point_kind"] = [
        isinstance(cb, lpl.Callback) for cb in bare_trainer(lpl, root).callbacks
        if isinstance(cb, tl._Hooks)]

    # install(): one callback per Trainer, none added beside the user's; idempotent; remove().
    original = (lpl.Trainer.__init__, ppl.Trainer.__init__)
    handle = tl.install()
    seen["install_same_handle"] = tl.install() is handle
    seen["install_packages"] = sorted(handle.packages)
    seen["install_lightning"] = count(bare_trainer(lpl, root), tl._Hooks)
    seen["install_pytorch_lightning"] = count(bare_trainer(ppl, root), tl._Hooks)
    seen["install_pytorch_lightning_kind"] = [
        isinstance(cb, ppl.Callback) for cb in bare_trainer(ppl, root).callbacks
        if isinstance(cb, tl._Hooks)]
    user = tl.TrainscopeCallback()
    trainer = bare_trainer(lpl, root, callbacks=[user])
    seen["install_beside_users"] = count(trainer, tl._Hooks)
    seen["install_keeps_users"] = any(cb is user for cb in trainer.callbacks)
    handle.remove()
    seen["removed_lightning"] = count(bare_trainer(lpl, root), tl._Hooks)
    seen["removed_pytorch_lightning"] = count(bare_trainer(ppl, root), tl._Hooks)
    seen["removed_restores_init"] = (lpl.Trainer.__init__, ppl.Trainer.__init__) == original
    seen["reinstall_new_handle"] = tl.install() is not handle
    tl.install().remove()

    # Two TrainscopeCallbacks (the user's and, under auto, the entry point's): one records.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = trainscope.start_run(root=os.path.join(root, "runs"))
        probe = where_fetches_are_timed(lpl)
        trainer = fit(lpl, root, [tl.TrainscopeCallback(), probe()])
        run.end()
    seen["two_callbacks_fetch_bracket"] = probe.seen
    regions = trainscope.read_run(run.dir).regions
    del regions
    seen["two_callbacks_count"] = count(trainer, tl._Hooks)
    seen["two_callbacks_regions"] = cpu_counts(run.dir)
    seen["two_callbacks_steps"] = trainer.global_step
    seen["two_callbacks_warnings"] = [str(w.message) for w in caught
                                      if issubclass(w.category, trainscope.TrainscopeWarning)]

    # The data wait through the profiler's start/stop (4 steps, 1 epoch, 1 validation).
    tl._FETCH_VIA_PROFILER = True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = trainscope.start_run(root=os.path.join(root, "runs"))
        probe = where_fetches_are_timed(lpl)
        trainer = fit(lpl, root, [tl.TrainscopeCallback(), probe()], validate=True)
        run.end()
    tl._FETCH_VIA_PROFILER = False
    seen["via_profiler_fetch_bracket"] = probe.seen
    seen["via_profiler_undone"] = "start" not in vars(trainer.profiler)
    seen["via_profiler_regions"] = cpu_counts(run.dir)
    seen["via_profiler_warnings"] = [str(w.message) for w in caught
                                     if issubclass(w.category, trainscope.TrainscopeWarning)]

    # A hook that fails: one warning per hook, and the training goes on.
    def broken(self, key):
        raise RuntimeError("broken on purpose")

    tl._Hooks._start = broken
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = fit(lpl, root, [tl.TrainscopeCallback()], max_steps=6)
    seen["broken_steps"] = trainer.global_step
    seen["broken_warnings"] = [str(w.message) for w in caught
                               if issubclass(w.category, trainscope.TrainscopeWarning)]
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
