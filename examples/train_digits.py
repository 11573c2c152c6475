"""Train a small CNN on handwritten digits: the flambeau demo.

The data are the 1797 8x8 scans of handwritten digits that scikit-learn bundles (from the UCI
repository), shipped inside flambeau-data as ``flambeau.data.datasets.Digits``, so nothing is
downloaded. The model is two 3x3 convolutions with batch normalisation, a max-pool and two linear
layers, trained with Adam, a cosine learning-rate schedule and label smoothing on images shifted at
random by up to one pixel; the program prints a progress line per epoch, the test accuracy, and the
training throughput.

    nox -s demo                        # from a fresh clone: installs everything, then runs this
    python examples/train_digits.py --epochs 20 --batch-size 32 --workers 0
    python examples/train_digits.py --device cuda    # on a GPU (pinned batches, non-blocking copies)
"""

from __future__ import annotations

import argparse
import sys
import time

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F
from flambeau.data import DataLoader
from flambeau.data.datasets import Digits
from flambeau.optim import Adam
from flambeau.optim.lr_scheduler import CosineAnnealingLR


class RandomShift:
    """Moves a ``(1, 8, 8)`` image by up to ``pixels`` in each direction, filling with zeros (augmentation)."""

    def __init__(self, pixels: int = 1):
        self.pixels = pixels

    def __call__(self, image):
        p = self.pixels
        dy, dx = (int(v) for v in fl.randint(0, 2 * p + 1, (2,)))
        padded = F.pad(image, (p, p, p, p))
        return padded[:, dy:dy + 8, dx:dx + 8]


class DigitsNet(nn.Module):
    """(N, 1, 8, 8) float32 images -> (N, 10) logits."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(2 * width)
        self.fc1 = nn.Linear(2 * width * 4 * 4, 128)
        self.dropout = nn.Dropout(0.25)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = self.dropout(F.relu(self.fc1(x.flatten(1))))
        return self.fc2(x)


def evaluate(model: nn.Module, loader: DataLoader, device: str = "cpu") -> float:
    """Accuracy of ``model`` over ``loader``, in eval mode and without recording gradients."""
    model.eval()
    correct = total = 0
    with fl.no_grad():
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            correct += int((model(images).argmax(1) == labels).sum().item())
            total += len(labels)
    model.train()
    return correct / total


def progress(epoch: int, epochs: int, loss: float, accuracy: float, elapsed: float) -> str:
    done = round(20 * epoch / epochs)
    return (f"epoch {epoch:3d}/{epochs} [{'#' * done}{'.' * (20 - done)}] "
            f"loss {loss:.4f}  test accuracy {accuracy:6.2%}  {elapsed:5.1f} s")


def throughput(epoch_times: list[float], epoch_images: list[int]) -> str:
    """The training throughput in images/s, steady state: without the first epoch where there are more, since on
    a fresh install it also compiles the kernels (numba's JIT; its cache makes later runs start at full speed)."""
    if len(epoch_times) < 2:
        return f"training throughput {sum(epoch_images) / sum(epoch_times):,.0f} images/s"
    rate = sum(epoch_images[1:]) / sum(epoch_times[1:])
    counted = "epoch 2" if len(epoch_times) == 2 else f"epochs 2-{len(epoch_times)}"
    return (f"training throughput {rate:,.0f} images/s ({counted}; the first took {epoch_times[0]:.1f} s, "
            "compiling the kernels where they were not cached yet)")


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=0.97, help="exit 1 below this test accuracy")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    args = parser.parse_args(argv)
    device = args.device
    on_gpu = fl.device(device).type == "cuda"

    fl.manual_seed(args.seed)
    train_set, test_set = Digits(train=True, transform=RandomShift(1)), Digits(train=False)
    generator = fl.Generator().manual_seed(args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, generator=generator,
                              num_workers=args.workers, persistent_workers=args.workers > 0, pin_memory=on_gpu)
    test_loader = DataLoader(test_set, batch_size=256)
    print(f"digits: {len(train_set)} training and {len(test_set)} test images of 8x8 pixels")

    model = DigitsNet().to(device)
    print(model)
    print(f"{sum(p.numel() for p in model.parameters()):,} parameters")
    optimizer = Adam(model.parameters(), lr=args.lr)
    scheduler = CosineAnnealingLR(optimizer, T_max=args.epochs)

    start = time.perf_counter()
    epoch_times, epoch_images = [], []  # training time and images of each epoch
    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        epoch_start, total_loss, seen = time.perf_counter(), 0.0, 0
        for images, labels in train_loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * len(labels)
            seen += len(labels)
        epoch_times.append(time.perf_counter() - epoch_start)
        epoch_images.append(seen)
        scheduler.step()
        accuracy = evaluate(model, test_loader, device)
        print(progress(epoch, args.epochs, total_loss / len(train_set), accuracy, time.perf_counter() - start),
              flush=True)

    print(f"test accuracy {accuracy:.2%} after {args.epochs} epochs; {throughput(epoch_times, epoch_images)}")
    if accuracy < args.target:
        print(f"below the target accuracy {args.target:.0%}", file=sys.stderr)
        sys.exit(1)
    return accuracy


if __name__ == "__main__":
    main()
