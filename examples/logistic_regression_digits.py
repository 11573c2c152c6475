"""Softmax regression on handwritten digits, with the gradients written out by hand.

The data are scikit-learn's bundled 8x8 digits (1797 real scans of handwritten 0-9, shipped inside
the scikit-learn package, so nothing is downloaded). A linear model ``logits = x @ W + b`` is
trained with mini-batch SGD on the mean cross-entropy

    loss = -mean_i log softmax(logits_i)[y_i]

whose gradient with respect to the logits is ``(softmax(logits) - one_hot(y)) / batch``; the
gradients of ``W`` and ``b`` follow by the chain rule (``x.T @ g`` and ``g.sum(0)``). With
flambeau-autograd installed, ``loss.backward()`` computes the same gradients for you.

Run it with ``nox -s demo`` or ``python examples/logistic_regression_digits.py``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from sklearn.datasets import load_digits

import flambeau as fl

NUM_CLASSES = 10


def load_data(test_fraction: float, seed: int):
    """Digits as float32 tensors in [0, 1], split into train and test sets by a seeded shuffle."""
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)  # (1797, 64): pixel intensities 0..16
    y = digits.target.astype(np.int64)  # (1797,)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(test_fraction * len(x)))
    test, train = order[:n_test], order[n_test:]
    return (fl.from_numpy(x[train]), fl.from_numpy(y[train]),
            fl.from_numpy(x[test]), fl.from_numpy(y[test]))


def one_hot(y: fl.Tensor, num_classes: int) -> fl.Tensor:
    """(n,) int64 class indices -> (n, num_classes) float32 rows of 0 and 1."""
    return (y.unsqueeze(1) == fl.arange(num_classes).unsqueeze(0)).float()


def cross_entropy(logits: fl.Tensor, targets: fl.Tensor) -> fl.Tensor:
    """Mean over the batch of -log softmax(logits)[target]; targets one-hot (n, C)."""
    return -(fl.log_softmax(logits, dim=1) * targets).sum(dim=1).mean()


def accuracy(w: fl.Tensor, b: fl.Tensor, x: fl.Tensor, y: fl.Tensor) -> float:
    predicted = fl.matmul(x, w).add(b).argmax(dim=1)
    return (predicted == y).float().mean().item()


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-accuracy", type=float, default=0.95,
                        help="exit with an error if the final test accuracy is lower")
    args = parser.parse_args(argv)

    fl.manual_seed(args.seed)
    x_train, y_train, x_test, y_test = load_data(test_fraction=0.2, seed=args.seed)
    n, features = x_train.shape
    print(f"digits: {n} training and {x_test.shape[0]} test images of {features} pixels, {NUM_CLASSES} classes")

    w = fl.zeros(features, NUM_CLASSES)
    b = fl.zeros(NUM_CLASSES)
    targets = one_hot(y_train, NUM_CLASSES)

    seen = 0
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        order = fl.randperm(n)
        total_loss = 0.0
        for first in range(0, n, args.batch_size):
            idx = order[first:first + args.batch_size]
            x, t = x_train[idx], targets[idx]  # (B, 64), (B, 10)
            logits = x @ w + b  # (B, 10)
            total_loss += cross_entropy(logits, t).item() * x.shape[0]
            # d loss / d logits of the mean cross-entropy, then the chain rule to W and b.
            g = (fl.softmax(logits, dim=1) - t) / x.shape[0]
            grad_w = x.T @ g + args.weight_decay * w
            grad_b = g.sum(dim=0)
            w -= args.lr * grad_w
            b -= args.lr * grad_b
            seen += x.shape[0]
        if epoch == 1 or epoch % 5 == 0 or epoch == args.epochs:
            print(f"epoch {epoch:3d}  loss {total_loss / n:.4f}  train acc {accuracy(w, b, x_train, y_train):.3f}"
                  f"  test acc {accuracy(w, b, x_test, y_test):.3f}")
    elapsed = time.perf_counter() - start

    test_acc = accuracy(w, b, x_test, y_test)
    print(f"final test accuracy: {test_acc:.2%} ({x_test.shape[0]} images)")
    print(f"throughput: {seen / elapsed:,.0f} training images/s ({seen} in {elapsed:.2f} s, "
          f"batch {args.batch_size}, including the progress evaluations)")
    if test_acc < args.min_accuracy:
        sys.exit(f"test accuracy {test_acc:.2%} is below --min-accuracy {args.min_accuracy:.0%}")
    return test_acc


if __name__ == "__main__":
    main()
