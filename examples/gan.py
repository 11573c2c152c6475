"""Listing 2 of the PyTorch paper, with ``torch`` replaced by ``flambeau``: one GAN training step.

``step`` is the listing's code: two models, two Adam optimizers, ``detach`` to keep the
discriminator's fake-sample loss away from the generator, and two backward calls. The listing is
"simplified" in one way this program cannot be: without ``zero_grad`` every gradient would keep
accumulating across steps, so the two ``zero_grad`` calls torch's DCGAN example makes are added
(marked). The generator learns to draw 8x8 digits from noise; the program prints how far the
generated images' pixel statistics are from the real ones as training goes.

    python examples/gan.py
"""

from __future__ import annotations

import argparse

import flambeau as fl
import flambeau.nn as nn
import flambeau.optim as optim
from flambeau.data.datasets import Digits

NOISE = 16
BATCH = 64


def create_discriminator():
    return nn.Sequential(nn.Linear(64, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1), nn.Sigmoid())


def create_generator():
    return nn.Sequential(nn.Linear(NOISE, 128), nn.ReLU(), nn.Linear(128, 64), nn.Sigmoid())


def get_noise():
    return fl.randn(BATCH, NOISE)


loss = nn.BCELoss()
real_label = fl.ones(BATCH, 1)
fake_label = fl.zeros(BATCH, 1)
discriminator = create_discriminator()
generator = create_generator()
optimD = optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimG = optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))


def step(real_sample):
    # (1) Update Discriminator
    optimD.zero_grad()  # added
    errD_real = loss(discriminator(real_sample), real_label)
    errD_real.backward()
    fake = generator(get_noise())
    errD_fake = loss(discriminator(fake.detach()), fake_label)
    errD_fake.backward()
    optimD.step()
    # (2) Update Generator
    optimG.zero_grad()  # added
    errG = loss(discriminator(fake), real_label)
    errG.backward()
    optimG.step()
    return errD_real.item() + errD_fake.item(), errG.item()


def pixel_distance(fake, real) -> float:
    """Mean absolute difference of the per-pixel means of generated and real images."""
    return float((fake.mean(0) - real.mean(0)).abs().mean().item())


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    args = parser.parse_args(argv)
    fl.manual_seed(0)
    dataset = Digits(train=True)
    real = fl.stack([dataset[i][0].flatten() for i in range(len(dataset))])
    start = pixel_distance(generator(get_noise()).detach(), real)
    for i in range(1, args.steps + 1):
        errD, errG = step(real[fl.randint(0, len(real), (BATCH,))])
        if i % 250 == 0:
            with fl.no_grad():
                distance = pixel_distance(generator(fl.randn(512, NOISE)), real)
            print(f"step {i:5d}  loss D {errD:.3f}  loss G {errG:.3f}  pixel-mean distance {distance:.4f}")
    with fl.no_grad():
        distance = pixel_distance(generator(fl.randn(512, NOISE)), real)
    print(f"pixel-mean distance from real digits: {start:.4f} before training, {distance:.4f} after")
    return distance / start


if __name__ == "__main__":
    main()
