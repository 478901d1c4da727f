"""Framework jobs whose work per step is known by construction, for
tests/python/test_framework_work.py (the ledger's samples and tokens under
`trainscope run --auto`, docs/ledger.md). Run with the framework venv's python
(torch 2.x, transformers, Lightning); no download, CPU.

    work_train.py --framework hf --count no|all|non_padding --out truth.json
    work_train.py --framework lightning --out truth.json --root-dir DIR
    torchrun --nproc-per-node 2 work_train.py ...  (DDP on the CPU, gloo; rank 0 writes --out)

hf: a run_clm-like causal LM: a tiny GPT-2 built from a config, a word-level
tokenizer built here (tokenizers), texts of WORDS words each, padded by
DataCollatorForLanguageModeling to a multiple of SEQUENCE (PADDING pad tokens
per sample), the Trainer's include_num_input_tokens_seen = --count.
lightning: an embedding and a head called one after the other in training_step
(two outermost module calls per batch) on dict batches of token ids with an
attention mask (PADDING pad tokens per sample).

Every sample has SEQUENCE - PADDING real tokens, so a step's work does not depend
on the order of the samples; --out gets the figures the test expects (per rank).
"""

import argparse
import json
import os
import warnings

import torch

WORDS = 13  # real tokens per sample
SEQUENCE = 16  # tokens per sample once padded
PADDING = SEQUENCE - WORDS
VOCAB_WORDS = 50
WORLD = int(os.environ.get("WORLD_SIZE", "1"))  # torchrun's


def hf_job(options):
    # pylint: disable=import-outside-toplevel
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (DataCollatorForLanguageModeling, GPT2Config, GPT2LMHeadModel,
                              PreTrainedTokenizerFast, Trainer, TrainingArguments)

    vocab = {"[PAD]": 0, "[UNK]": 1}
    vocab.update({f"w{i}": i + 2 for i in range(VOCAB_WORDS)})
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]",
                                        unk_token="[UNK]")
    generator = torch.Generator().manual_seed(3)
    texts = [" ".join(f"w{int(i)}" for i in torch.randint(0, VOCAB_WORDS, (WORDS,),
                                                           generator=generator))
             for _ in range(options.train_size)]
    dataset = [{"input_ids": tokenizer(text)["input_ids"]} for text in texts]
    assert all(len(sample["input_ids"]) == WORDS for sample in dataset)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=False,
                                               pad_to_multiple_of=SEQUENCE)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(vocab), n_positions=SEQUENCE, n_embd=32,
                                       n_layer=1, n_head=2, pad_token_id=0))
    args = TrainingArguments(
        output_dir=os.path.join(os.path.dirname(os.path.abspath(options.out)), "hf-output"),
        max_steps=options.steps, per_device_train_batch_size=options.batch,
        gradient_accumulation_steps=options.accum, learning_rate=1e-3, seed=5,
        include_num_input_tokens_seen=options.count, logging_steps=4, save_strategy="no",
        report_to="none", disable_tqdm=True, use_cpu=True, dataloader_num_workers=0,
        ddp_backend="gloo" if WORLD > 1 else None)
    trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=collator)
    trainer.train()
    samples = options.batch * options.accum
    counted = "all" if options.count == "all" else "non_padding"
    return {"steps": trainer.state.global_step, "samples_per_step": samples,
            "tokens_per_step": samples * (SEQUENCE if counted == "all" else WORDS),
            "num_input_tokens_seen": trainer.state.num_input_tokens_seen}


def lightning_job(options):
    import lightning.pytorch as pl  # pylint: disable=import-outside-toplevel

    class Tokens(torch.utils.data.Dataset):
        def __init__(self, size):
            generator = torch.Generator().manual_seed(4)
            self.ids = torch.randint(1, VOCAB_WORDS, (size, SEQUENCE), generator=generator)
            self.ids[:, WORDS:] = 0  # the padding, at the end
            self.mask = (self.ids != 0).long()

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, i):
            return {"input_ids": self.ids[i], "attention_mask": self.mask[i]}

    class TwoModules(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB_WORDS, 16)
            self.head = torch.nn.Linear(16, VOCAB_WORDS)

        def training_step(self, batch, batch_idx):
            hidden = self.embed(batch["input_ids"])  # one outermost module call ...
            logits = self.head(hidden)  # ... and another, on the same batch
            labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
            return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, VOCAB_WORDS),
                                                     labels[:, 1:].reshape(-1))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    loader = torch.utils.data.DataLoader(Tokens(options.train_size), batch_size=options.batch,
                                         shuffle=True)
    trainer = pl.Trainer(max_steps=options.steps, accumulate_grad_batches=options.accum,
                         default_root_dir=options.root_dir, accelerator="cpu", devices=WORLD,
                         strategy="ddp" if WORLD > 1 else "auto",
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(TwoModules(), loader)
    samples = options.batch * options.accum
    return {"steps": trainer.global_step, "samples_per_step": samples,
            "tokens_per_step": samples * WORDS}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", choices=("hf", "lightning"), required=True)
    parser.add_argument("--count", choices=("no", "all", "non_padding"), default="no")
    parser.add_argument("--out", required=True)
    parser.add_argument("--root-dir", default=".")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--accum", type=int, default=2)
    parser.add_argument("--train-size", type=int, default=64)
    options = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")  # the frameworks' advice on workers and loggers
    truth = hf_job(options) if options.framework == "hf" else lightning_job(options)
    truth["world_size"] = WORLD
    if os.environ.get("RANK", "0") == "0":
        with open(options.out, "w", encoding="utf-8") as out:
            json.dump(truth, out)


if __name__ == "__main__":
    main()
