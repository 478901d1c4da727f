"""A token model trained from a DataLoader of padded batches (input_ids and an
attention_mask with a random amount of padding per row), for the step work of
`trainscope run --auto` (tests/python/test_step_work.py, docs/ledger.md):

    python token_train.py [-n BATCHES] [-b BATCH] [-s SEQ] [-w WIDTH] [-v VOCAB] [--no-mask]
                          [--user]

The model is called as model(input_ids=..., attention_mask=...). The script counts
its own samples and tokens (the mask's ones; without --no-mask) and prints them
as one JSON line, with the seconds its training steps took (from the first batch
fetched to the loader's end). --user: it logs each
step's work itself with trainscope.log_step_work.
"""

import argparse
import json
import time

import torch
from torch import nn


class Padded(torch.utils.data.Dataset):
    def __init__(self, count, seq, vocab):
        generator = torch.Generator().manual_seed(7)
        self.ids = torch.randint(1, vocab, (count, seq), generator=generator)
        lengths = torch.randint(1, seq + 1, (count,), generator=generator)
        self.mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()

    def __len__(self):
        return self.ids.shape[0]

    def __getitem__(self, index):
        return {"input_ids": self.ids[index], "attention_mask": self.mask[index]}


class TokenModel(nn.Module):
    def __init__(self, vocab, width):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.out = nn.Linear(width, vocab)

    def forward(self, input_ids, attention_mask=None):
        hidden = self.embed(input_ids)
        if attention_mask is not None:
            hidden = hidden * attention_mask[..., None]
        return self.out(hidden)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", dest="batches", type=int, default=12)
    parser.add_argument("-b", dest="batch_size", type=int, default=8)
    parser.add_argument("-s", dest="seq", type=int, default=32)
    parser.add_argument("-w", dest="width", type=int, default=16)
    parser.add_argument("-v", dest="vocab", type=int, default=50)
    parser.add_argument("--no-mask", action="store_true")
    parser.add_argument("--user", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    vocab = args.vocab
    data = Padded(args.batches * args.batch_size, args.seq, vocab)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size)
    model = TokenModel(vocab, args.width)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    samples = tokens = 0
    begun = None
    for step, batch in enumerate(loader):
        if begun is None:
            begun = time.perf_counter()  # the steps: from the first batch on
        mask = None if args.no_mask else batch["attention_mask"]
        logits = model(input_ids=batch["input_ids"], attention_mask=mask)
        loss = nn.functional.cross_entropy(logits.reshape(-1, vocab),
                                           batch["input_ids"].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step_tokens = int(batch["input_ids"].numel() if mask is None else mask.sum())
        samples += int(batch["input_ids"].shape[0])
        tokens += step_tokens
        if args.user:
            import trainscope  # pylint: disable=import-outside-toplevel
            trainscope.log_step_work(samples=batch["input_ids"].shape[0], tokens=step_tokens,
                                     step=step)
    print(json.dumps({"samples": samples, "tokens": tokens, "steps": args.batches,
                      "seconds": time.perf_counter() - begun}))


if __name__ == "__main__":
    main()
