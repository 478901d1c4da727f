"""trainscope.hf.install() and the callback's guards, checked in a python with
transformers (tests/python/test_hf.py runs it and reads the JSON it prints last).

No training: Trainers are built (a tiny BERT from a config, no download) and the
callback's hooks are called by hand.
"""

import json
import sys
import warnings


def callbacks_of(trainer, cls):
    return sum(isinstance(c, cls) for c in trainer.callback_handler.callbacks)


def main():
    import trainscope  # pylint: disable=import-outside-toplevel
    import trainscope.hf as hf  # pylint: disable=import-outside-toplevel

    facts = {"trainer_imported_by_hf": "transformers.trainer" in sys.modules}
    handle = hf.install()
    facts["install_idempotent"] = hf.install() is handle
    # install() does not import the Trainer (and torch) itself: it waits for it.
    facts["trainer_imported_by_install"] = "transformers.trainer" in sys.modules

    import torch  # pylint: disable=import-outside-toplevel
    # pylint: disable=import-outside-toplevel
    from transformers import (BertConfig, BertForSequenceClassification, Trainer,
                              TrainingArguments)
    from transformers.trainer import Trainer as TrainerClass
    torch.set_num_threads(1)
    callback_class = hf.TrainscopeCallback
    facts["patched_on_import"] = "__trainscope_original__" in vars(TrainerClass.__init__)

    def model():
        return BertForSequenceClassification(BertConfig(
            vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32))

    args = TrainingArguments(output_dir="hf-install-check", report_to="none", use_cpu=True,
                             save_strategy="no", disable_tqdm=True)

    class MyTrainer(Trainer):
        pass

    facts["plain"] = callbacks_of(Trainer(model=model(), args=args), callback_class)
    facts["subclass"] = callbacks_of(MyTrainer(model=model(), args=args), callback_class)
    facts["user_instance"] = callbacks_of(
        Trainer(model=model(), args=args, callbacks=[callback_class()]), callback_class)
    facts["user_class"] = callbacks_of(
        Trainer(model=model(), args=args, callbacks=[callback_class]), callback_class)
    facts["evaluation_patched"] = hasattr(TrainerClass.evaluation_loop, "__trainscope_original__")

    handle.remove()
    handle.remove()  # a second remove() is harmless
    facts["after_remove"] = callbacks_of(Trainer(model=model(), args=args), callback_class)
    facts["init_restored"] = "__trainscope_original__" not in vars(TrainerClass.__init__)
    facts["evaluation_restored"] = not hasattr(TrainerClass.evaluation_loop,
                                               "__trainscope_original__")
    again = hf.install()
    facts["reinstall_new_handle"] = again is not handle
    facts["reinstalled"] = callbacks_of(Trainer(model=model(), args=args), callback_class)
    again.remove()

    # A hook that fails warns once and returns None (the Trainer's control is unchanged).
    from trainscope import _auto  # pylint: disable=import-outside-toplevel

    class Broken:
        step_owner = None
        patched = set()

        def __init__(self):
            self._real = _auto.recorder()

        def start(self, key):
            raise RuntimeError("broken recorder")

        def warn(self, what, message):
            self._real.warn(what, message)

    broken = Broken()
    callback = callback_class()
    callback._rec = broken  # pylint: disable=protected-access
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [callback.on_step_begin(args, None, None) for _ in range(3)]
        results.append(callback.on_epoch_begin(args, None, None))
    facts["broken_results"] = [r is None for r in results]
    facts["broken_warnings"] = sorted(str(w.message).split(":")[1].strip() for w in caught
                                      if issubclass(w.category, trainscope.TrainscopeWarning))
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
