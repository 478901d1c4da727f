"""The books trainscope.hf and trainscope.lightning share (trainscope._framework),
driven through each callback's own hooks with stand-in trainers: a second start of
an open key, the steps handed over and back, params checked against the run.
Prints one JSON object: per framework what the run holds."""

import json
import sys
import types
import warnings


def counts(run_dir):
    import trainscope  # pylint: disable=import-outside-toplevel
    regions = trainscope.read_run(run_dir).regions
    regions = regions[regions.device == "CPU"]
    return {str(k): int(n) for k, n in regions.key.value_counts().items() if n}


def run_with(root, drive):
    """A run whose params hold the command line's learning_rate (as `trainscope run`
    logs "--learning_rate 0.01"); drive(callback owner check) inside it."""
    import trainscope  # pylint: disable=import-outside-toplevel
    from trainscope import _auto  # pylint: disable=import-outside-toplevel
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with trainscope.start_run(root=root) as run:
            trainscope.log_param("learning_rate", "0.01")
            owners = drive(_auto.recorder())
            owners.append(_auto.recorder().step_owner)
    return {"regions": counts(run.dir), "owners": owners,
            "params": dict(trainscope.read_run(run.dir).params),
            "warnings": [str(w.message) for w in caught
                         if issubclass(w.category, trainscope.TrainscopeWarning)]}


def drive_hf(rec):
    from trainscope import hf  # pylint: disable=import-outside-toplevel
    callback = hf.TrainscopeCallback(phases=False)
    args = types.SimpleNamespace(learning_rate=0.01, max_grad_norm=1.0)
    state = types.SimpleNamespace(global_step=0, max_steps=2, num_train_epochs=1)
    callback.on_train_begin(args, state, None)
    owners = [rec.step_owner]
    callback.on_epoch_begin(args, state, None)
    callback.on_epoch_begin(args, state, None)  # a second start of the open EPOCH
    callback.on_epoch_end(args, state, None)
    callback.on_train_end(args, state, None)
    return owners


def drive_lightning(rec):
    from trainscope import lightning  # pylint: disable=import-outside-toplevel
    callback = lightning.TrainscopeCallback()
    profiler = types.SimpleNamespace(start=lambda action: None, stop=lambda action: None)
    trainer = types.SimpleNamespace(callbacks=[callback], profiler=profiler, logged_metrics={},
                                    global_step=0, sanity_checking=False, max_epochs=1)
    module = types.SimpleNamespace(hparams={"learning_rate": 0.01})
    callback.setup(trainer, module, "fit")
    callback.on_fit_start(trainer, module)
    owners = [rec.step_owner]
    callback.on_train_epoch_start(trainer, module)
    callback.on_train_epoch_start(trainer, module)  # a second start of the open EPOCH
    callback.on_train_epoch_end(trainer, module)
    callback.teardown(trainer, module, "fit")
    return owners


def main():
    root = sys.argv[1]
    print(json.dumps({"hf": run_with(root, drive_hf),
                      "lightning": run_with(root, drive_lightning)}))


if __name__ == "__main__":
    main()
