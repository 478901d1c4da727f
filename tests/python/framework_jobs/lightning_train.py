"""A tiny Lightning fit (a small MLP on synthetic data, CPU) for tests/python/test_lightning.py.

Run under `trainscope run` with the framework venv's python. The TrainscopeCallback
comes from the Trainer's callbacks (--attach callback), from
trainscope.lightning.install() (--attach install) or from `trainscope run --auto`
alone (--attach none). What the training did is
written to --out (JSON) for the test to compare with the run: each training
batch's loss and the optimizer steps before it, each validation's mean loss and
the step it ran at, the optimizer steps taken, the TrainscopeCallbacks the
Trainer had.

    python lightning_train.py --out truth.json --root-dir DIR [--accumulate 2]
        [--max-steps 8] [--batches-per-epoch 4] [--attach callback|install|none]
        [--package lightning|pytorch_lightning]
"""

import argparse
import json
import warnings

import torch

VAL_SAMPLES = 8
BATCH_SIZE = 4  # 2 validation batches


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--root-dir", required=True)
    parser.add_argument("--accumulate", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--batches-per-epoch", type=int, default=4)
    parser.add_argument("--attach", choices=("callback", "install", "none"), default="callback")
    parser.add_argument("--package", choices=("lightning", "pytorch_lightning"),
                        default="lightning")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")  # Lightning's advice on workers and loggers

    import trainscope.lightning as ts_lightning  # imports no Lightning
    if args.package == "lightning":
        import lightning.pytorch as pl
    else:
        import pytorch_lightning as pl
    if args.attach == "install":  # as the bootstrap of `trainscope run --auto` does
        ts_lightning.install()
    from torch.utils.data import DataLoader, TensorDataset

    truth = {"train": [], "val": []}

    class Regressor(pl.LightningModule):
        def __init__(self, hidden_dim=16, lr=0.05, batch_size=BATCH_SIZE):
            super().__init__()
            self.save_hyperparameters()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, hidden_dim), torch.nn.ReLU(),
                                           torch.nn.Linear(hidden_dim, 1))
            self.val_losses = []

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss)
            truth["train"].append({"epoch": self.current_epoch, "batch_idx": batch_idx,
                                   "steps_before": self.trainer.global_step,
                                   "loss": loss.item()})
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("val_loss", loss)
            self.val_losses.append(loss.item())

        def on_validation_epoch_end(self):
            if not self.trainer.sanity_checking:
                truth["val"].append({"step": self.trainer.global_step,
                                     "val_loss": sum(self.val_losses) / len(self.val_losses)})
            self.val_losses = []

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

    train_samples = args.batches_per_epoch * BATCH_SIZE
    torch.manual_seed(0)
    x = torch.randn(train_samples + VAL_SAMPLES, 8)
    y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(train_samples + VAL_SAMPLES, 1)
    train = DataLoader(TensorDataset(x[:train_samples], y[:train_samples]),
                       batch_size=BATCH_SIZE, shuffle=True)
    val = DataLoader(TensorDataset(x[train_samples:], y[train_samples:]), batch_size=BATCH_SIZE)

    callbacks = [ts_lightning.TrainscopeCallback()] if args.attach == "callback" else []
    trainer = pl.Trainer(max_steps=args.max_steps, accumulate_grad_batches=args.accumulate,
                         accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=1, limit_val_batches=2, log_every_n_steps=1,
                         default_root_dir=args.root_dir, callbacks=callbacks)
    model = Regressor()
    trainer.fit(model, train, val)

    truth["optimizer_steps"] = trainer.global_step
    truth["epochs"] = trainer.current_epoch
    truth["trainscope_callbacks"] = sum(
        type(cb).__name__ == "TrainscopeCallback" for cb in trainer.callbacks)
    truth["hparams"] = {k: str(v) for k, v in model.hparams.items()}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(truth, f)


if __name__ == "__main__":
    main()
