"""A two-rank FSDP2 job (`fully_shard`, gloo, CPU) with no trainscope in it, for
`trainscope run --auto` (tests/python/test_comm_fsdp.py): two Linear layers,
each sharded on its own (one all-gather in forward, one in backward and one
reduce-scatter per layer and step), the root holding no parameter of its own.
--late-s: rank 1 enters each reduce-scatter that late, through the hook FSDP
offers (set_custom_reduce_scatter): rank 0's backward waits for it there.
Prints one JSON line per rank: the bytes of each layer's parameters
(float32), which the all-gather and the reduce-scatter of that layer move.
Run by diagnosis_jobs/launch2.py (or torchrun) as two ranks. FSDP1
(`FullyShardedDataParallel`) needs an accelerator in torch >= 2.x here.
"""

import argparse
import json
import time

import torch
import torch.distributed as dist

try:
    from torch.distributed.fsdp import fully_shard
except ImportError:  # torch < 2.6
    from torch.distributed._composable.fsdp import fully_shard


def late_reduce_scatter(seconds):
    """FSDP's default reduce-scatter, entered `seconds` late."""
    # pylint: disable=import-outside-toplevel
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultReduceScatter

    class LateReduceScatter(DefaultReduceScatter):
        def __call__(self, *args, **kwargs):
            time.sleep(seconds)
            return super().__call__(*args, **kwargs)
    return LateReduceScatter()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--late-s", type=float, default=0.0)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 8))
    sizes = {}
    for index in (0, 2):
        layer = model[index]
        sizes[str(index)] = sum(p.numel() * p.element_size() for p in layer.parameters())
        fully_shard(layer)
    fully_shard(model)
    if rank == 1 and args.late_s:
        for index in (0, 2):
            model[index].set_custom_reduce_scatter(late_reduce_scatter(args.late_s))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64)
    for _ in range(args.steps):
        optimizer.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
    print(json.dumps({"rank": rank, "layer_bytes": sizes}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
