"""Train the demo's CNN on handwritten digits with DistributedDataParallel on 2 processes.

The model, data and recipe are those of examples/train_digits.py (two 3x3 convolutions with batch
normalisation, Adam, a cosine schedule, label smoothing, random shifts); here each of the N ranks
reads its share of every epoch through DistributedSampler, its batch norms compute their
statistics over all ranks' batches (SyncBatchNorm), and DistributedDataParallel averages the
gradients across ranks during backward, so the N ranks train one model on a global batch of
``--batch-size`` images. Rank 0 prints the progress and the test accuracy.

    python examples/ddp_digits.py                 # starts 2 ranks through flambeau.distributed.run
    python -m flambeau.distributed.run --nproc-per-node 2 examples/ddp_digits.py --epochs 20
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import flambeau as fl
import flambeau.distributed as dist
import flambeau.nn.functional as F
from flambeau.data import DataLoader
from flambeau.data.datasets import Digits
from flambeau.data.distributed import DistributedSampler
from flambeau.nn.parallel import DistributedDataParallel as DDP
from flambeau.optim import Adam
from flambeau.optim.lr_scheduler import CosineAnnealingLR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_digits import DigitsNet, RandomShift, evaluate, progress, throughput  # noqa: E402 - the demo's model and helpers


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2, help="ranks to start when run without the launcher")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32, help="global batch (split across the ranks)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-sync-bn", action="store_true", help="keep per-rank batch statistics")
    parser.add_argument("--target", type=float, default=0.97, help="exit 1 below this test accuracy")
    return parser.parse_args(argv)


def train(args: argparse.Namespace) -> float:
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} must be divisible by the number of ranks ({world})")
    fl.manual_seed(args.seed)
    model = DigitsNet()
    if not args.no_sync_bn:
        model = dist.SyncBatchNorm.convert_sync_batchnorm(model)
    model = DDP(model)  # rank 0's parameters everywhere; gradients averaged during backward
    fl.manual_seed(args.seed + 1 + rank)  # different augmentations and dropout masks on each rank
    train_set, test_set = Digits(train=True, transform=RandomShift(1)), Digits(train=False)
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size // world, sampler=sampler)
    test_loader = DataLoader(test_set, batch_size=256)
    optimizer = Adam(model.parameters(), lr=args.lr)
    scheduler = CosineAnnealingLR(optimizer, T_max=args.epochs)
    if rank == 0:
        print(f"digits: {len(train_set)} training images on {world} ranks ({len(sampler)} each per epoch), "
              f"global batch {args.batch_size}; {len(test_set)} test images")

    start, accuracy = time.perf_counter(), 0.0
    epoch_times, epoch_images = [], []  # training time and images (every rank's) of each epoch
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        epoch_start = time.perf_counter()
        totals = fl.zeros(2, dtype=fl.float64)  # loss sum and image count of this rank
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
            loss.backward()
            optimizer.step()
            totals += fl.tensor([loss.item() * len(labels), len(labels)], dtype=fl.float64)
        dist.all_reduce(totals)  # the epoch's loss over every rank's images
        epoch_times.append(time.perf_counter() - epoch_start)
        epoch_images.append(int(totals[1].item()))
        scheduler.step()
        accuracy = evaluate(model.module, test_loader)  # the replicas are equal: each evaluates the same model
        if rank == 0:
            print(progress(epoch, args.epochs, totals[0].item() / totals[1].item(), accuracy,
                           time.perf_counter() - start), flush=True)
    if rank == 0:
        print(f"test accuracy {accuracy:.2%} after {args.epochs} epochs; {throughput(epoch_times, epoch_images)} "
              f"on {world} ranks")
    dist.destroy_process_group()
    return accuracy


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if "RANK" not in os.environ and "PMI_RANK" not in os.environ:
        # Started as a plain program: start the ranks through the launcher and wait for them.
        command = [sys.executable, "-m", "flambeau.distributed.run", "--nproc-per-node", str(args.nproc),
                   os.path.abspath(__file__), *(sys.argv[1:] if argv is None else argv)]
        sys.exit(subprocess.call(command))
    accuracy = train(args)
    if accuracy < args.target:
        if os.environ.get("RANK") == "0":
            print(f"below the target accuracy {args.target:.0%}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
