"""Listing 1 of the PyTorch paper, with ``torch`` replaced by ``flambeau``: a custom layer as a building block.

The two classes are the listing's, line for line, with one line added: the listing feeds the
convolution's 4-d output straight into ``torch.mm``, which needs a matrix, so ``forward`` pools each
of the 128 feature maps to one number first (marked below). The model is then trained on the digits
of flambeau-data, to show that a layer built from ``nn.Parameter(fl.randn(...))`` learns like any other.

    python examples/listing1.py
"""

from __future__ import annotations

import argparse

import flambeau
import flambeau.nn as nn
import flambeau.optim
from flambeau.data.datasets import Digits
from flambeau.nn import Module


class LinearLayer(Module):
    def __init__(self, in_sz, out_sz):
        super().__init__()
        t1 = flambeau.randn(in_sz, out_sz)
        self.w = nn.Parameter(t1)
        t2 = flambeau.randn(out_sz)
        self.b = nn.Parameter(t2)

    def forward(self, activations):
        t = flambeau.mm(activations, self.w)
        return t + self.b


class FullBasicModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 128, 3)
        self.fc = LinearLayer(128, 10)

    def forward(self, x):
        t1 = self.conv(x)
        t2 = nn.functional.relu(t1)
        t2 = t2.mean((2, 3))  # added: one value per feature map, so that flambeau.mm gets a matrix
        t3 = self.fc(t2)
        return nn.functional.softmax(t3)  # as written: dim is implied (1 for a matrix), with a warning as in torch


def stack(dataset):
    images, labels = zip(*(dataset[i] for i in range(len(dataset))))
    return flambeau.stack(images), flambeau.tensor(labels)


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    args = parser.parse_args(argv)
    flambeau.manual_seed(0)
    x, y = stack(Digits(train=True))
    x_test, y_test = stack(Digits(train=False))
    model = FullBasicModel()
    optimizer = flambeau.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(1, args.steps + 1):
        batch = flambeau.randint(0, len(x), (64,))
        probabilities = model(x[batch])
        loss = -probabilities.gather(1, y[batch].unsqueeze(1)).clamp_min(1e-12).log().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}")
    with flambeau.no_grad():
        accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
    print(f"test accuracy {accuracy:.2%}")
    return accuracy


if __name__ == "__main__":
    main()
