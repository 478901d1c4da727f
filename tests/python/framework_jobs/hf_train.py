"""A tiny Hugging Face Trainer job for tests/python/test_hf.py (no download: a BERT
built from a config, synthetic data), run with a python that has torch 2.x and
transformers, under `trainscope run`.

    hf_train.py --mode callback|install|auto --out truth.json [--steps 16 --accum 2 ...]

--mode callback: the user adds trainscope.hf.TrainscopeCallback() to the Trainer;
install: the script calls trainscope.hf.install() before building it; global: it
also instruments PyTorch process-wide first (trainscope.torch.instrument(), as the
bootstrap of `--auto` does); auto: the script does nothing (`trainscope run --auto`
must). --out gets what the Trainer did:
its log_history, global_step, the batches per evaluation and the callbacks it had.
"""

import argparse
import json
import os

import torch


class Synthetic(torch.utils.data.Dataset):
    """Token sequences whose label is the parity of their first token."""

    def __init__(self, size, length, vocab, seed):
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, vocab, (size, length), generator=generator)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        ids = self.ids[i]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                "labels": int(ids[0]) % 2}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("callback", "install", "global", "auto"),
                        default="callback")
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--accum", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--train-size", type=int, default=64)
    parser.add_argument("--eval-size", type=int, default=8)
    parser.add_argument("--eval-steps", type=int, default=8)
    parser.add_argument("--logging-steps", type=int, default=4)
    parser.add_argument("--learning_rate", type=float, default=5e-4)  # (HF scripts spell it so)
    parser.add_argument("--seed", type=int, default=7)
    options = parser.parse_args()
    torch.set_num_threads(1)

    # pylint: disable=import-outside-toplevel
    from transformers import (BertConfig, BertForSequenceClassification, Trainer,
                              TrainingArguments)

    callbacks = []
    if options.mode == "callback":
        from trainscope.hf import TrainscopeCallback  # pylint: disable=import-outside-toplevel
        callbacks.append(TrainscopeCallback())
    elif options.mode == "install":
        import trainscope.hf  # pylint: disable=import-outside-toplevel
        trainscope.hf.install()
    elif options.mode == "global":  # what `--auto`'s bootstrap does, by hand
        import trainscope.hf  # pylint: disable=import-outside-toplevel
        import trainscope.torch  # pylint: disable=import-outside-toplevel
        trainscope.torch.instrument()
        trainscope.hf.install()

    vocab = 100
    model = BertForSequenceClassification(BertConfig(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, num_labels=2))
    args = TrainingArguments(
        output_dir=os.path.join(os.path.dirname(os.path.abspath(options.out)), "hf-output"),
        max_steps=options.steps, per_device_train_batch_size=options.batch,
        per_device_eval_batch_size=options.batch, gradient_accumulation_steps=options.accum,
        learning_rate=options.learning_rate, seed=options.seed, eval_strategy="steps",
        eval_steps=options.eval_steps, logging_strategy="steps",
        logging_steps=options.logging_steps, save_strategy="no", report_to="none",
        disable_tqdm=True, use_cpu=True, dataloader_num_workers=0)
    trainer = Trainer(model=model, args=args, callbacks=callbacks,
                      train_dataset=Synthetic(options.train_size, 16, vocab, 1),
                      eval_dataset=Synthetic(options.eval_size, 16, vocab, 2))
    trainer.train()
    import trainscope.torch  # pylint: disable=import-outside-toplevel
    truth = {
        "instrument_available": hasattr(trainscope.torch, "instrument"),
        "global_step": trainer.state.global_step,
        "log_history": trainer.state.log_history,
        "eval_batches": len(trainer.get_eval_dataloader()),
        "train_batches_per_epoch": len(trainer.get_train_dataloader()),
        "world_size": args.world_size,
        "callbacks": [type(c).__module__ + "." + type(c).__name__
                      for c in trainer.callback_handler.callbacks],
    }
    with open(options.out, "w", encoding="utf-8") as f:
        json.dump(truth, f, indent=1)


if __name__ == "__main__":
    main()
