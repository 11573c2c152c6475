"""Training-step benchmarks: whole models in flambeau against the same models in PyTorch, 2 threads each.

One step is ``zero_grad``, forward, cross-entropy, backward and an optimizer step, on a fixed
batch of float32 data. Each model is written once, over a library argument (``lib.nn``,
``lib.optim``), and built twice: in torch, then in flambeau with torch's initial parameters copied
in, so both sides run the same arithmetic. Before timing, one step on each side checks that the
two losses agree.

- MLP 784-1024-1024-10, batch 128, SGD with momentum;
- LeNet-style CNN (conv 32 and 64 3x3, max-pool, fc 128) on 1x28x28, batch 64, SGD with momentum;
- CIFAR ResNet-18 layout with widths 32-64-128-256 and BatchNorm, on 3x32x32, batch 32, SGD with momentum;
- MobileNetV2 (width 0.5) on 3x64x64, batch 16, SGD with momentum.

    nox -s bench                         # all benchmark scripts, results into RESULTS.md
    python benchmarks/train.py --quick   # fewer repeats, RESULTS.md untouched
    python benchmarks/train.py --only resnet18
"""

from __future__ import annotations

import argparse

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported
import numpy as np

import flambeau as fl
import flambeau.nn  # noqa: F401
import flambeau.optim  # noqa: F401


# --- models, written once over the library ---------------------------------------------------------
def mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))


def lenet(lib):
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 12 * 12, 128), nn.ReLU(), nn.Linear(128, 10),
    )


def resnet18(lib, widths=(32, 64, 128, 256), num_classes=10):
    """He et al.'s ResNet-18 in its CIFAR layout (3x3 stem, no stem pooling), narrower."""
    nn, F = lib.nn, lib.nn.functional

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + self.shortcut(x))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(widths[0])
            layers, cin = [], widths[0]
            for i, width in enumerate(widths):
                for j in range(2):
                    layers.append(BasicBlock(cin, width, 2 if i > 0 and j == 0 else 1))
                    cin = width
            self.layers = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(widths[-1], num_classes)

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.pool(self.layers(out))
            return self.fc(out.flatten(1))

    return ResNet()


def _divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def mobilenet_v2(lib, width=0.5, num_classes=10):
    """Sandler et al.'s MobileNetV2 (torchvision's layout: inverted residuals, ReLU6, depthwise 3x3)."""
    nn = lib.nn

    def conv_bn(cin, cout, kernel, stride, groups=1, act=True):
        layers = [nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(cout)]
        return layers + [nn.ReLU6(inplace=True)] if act else layers

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            hidden = int(round(cin * expand))
            self.use_residual = stride == 1 and cin == cout
            layers = conv_bn(cin, hidden, 1, 1) if expand != 1 else []
            layers += conv_bn(hidden, hidden, 3, stride, groups=hidden) + conv_bn(hidden, cout, 1, 1, act=False)
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.conv(x) if self.use_residual else self.conv(x)

    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1)]
    cin, last = _divisible(32 * width), _divisible(1280 * max(1.0, width))
    features = conv_bn(3, cin, 3, 2)
    for t, c, n, s in settings:
        cout = _divisible(c * width)
        for i in range(n):
            features.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
            cin = cout
    features += conv_bn(cin, last, 1, 1)
    head = [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(last, num_classes)]
    return nn.Sequential(*features, *head)


# name -> (builder, input shape without the batch, batch size)
MODELS = {
    "mlp": (mlp, (784,), 128),
    "lenet": (lenet, (1, 28, 28), 64),
    "resnet18": (resnet18, (3, 32, 32), 32),
    "mobilenet_v2": (mobilenet_v2, (3, 64, 64), 16),
}
TITLES = {
    "mlp": "MLP 784-1024-1024-10",
    "lenet": "LeNet-style CNN, 1x28x28",
    "resnet18": "ResNet-18 (32-64-128-256), 3x32x32",
    "mobilenet_v2": "MobileNetV2 x0.5, 3x64x64",
}


def train_step(lib, model, optimizer, x, y):
    """One SGD step; returns the loss tensor."""
    def step():
        optimizer.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss
    return step


def build_pair(torch, name: str, seed: int = 0):
    """The model in torch and in flambeau with the same parameters and buffers, and their step functions."""
    builder, shape, batch = MODELS[name]
    torch.manual_seed(seed)
    th_model = builder(torch)
    fl_model = builder(fl)
    fl_model.load_state_dict({k: fl.from_numpy(v.detach().numpy().copy()) for k, v in th_model.state_dict().items()})
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, *shape), dtype=np.float32)
    y = rng.integers(0, 10, batch)
    th_opt = torch.optim.SGD(th_model.parameters(), lr=0.01, momentum=0.9)
    fl_opt = fl.optim.SGD(fl_model.parameters(), lr=0.01, momentum=0.9)
    th_step = train_step(torch, th_model, th_opt, torch.from_numpy(x), torch.from_numpy(y))
    fl_step = train_step(fl, fl_model, fl_opt, fl.from_numpy(x), fl.from_numpy(y))
    return fl_model, th_model, fl_step, th_step, batch


def check_same_loss(fl_model, th_model, fl_step, th_step) -> float:
    """One step on each side (dropout off): the losses must agree before the timings mean anything."""
    fl_model.eval(), th_model.eval()  # noqa: B018 - dropout off for the check; BatchNorm uses running stats
    a, b = float(fl_step().item()), float(th_step().item())
    fl_model.train(), th_model.train()  # noqa: B018
    if not np.isclose(a, b, rtol=1e-3, atol=1e-4):
        raise SystemExit(f"losses differ: flambeau {a:.6f}, torch {b:.6f} — fix correctness before timing")
    return a


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats, RESULTS.md untouched")
    parser.add_argument("--only", choices=sorted(MODELS), action="append", help="run only these models")
    args = parser.parse_args()
    r = _harness.Report("train", "Training steps (benchmarks/train.py)", repeat=3 if args.quick else 7, target=0.2)
    torch = r.torch
    if torch is None:
        raise SystemExit("benchmarks/train.py needs torch: it builds each model in torch first")
    r.header()
    for name in args.only or MODELS:
        fl_model, th_model, fl_step, th_step, batch = build_pair(torch, name)
        check_same_loss(fl_model, th_model, fl_step, th_step)
        t_fl, t_th = r.compare(TITLES[name], f"batch {batch}, SGD momentum", fl_step, th_step)
        r.add_note(f"{TITLES[name]}: flambeau {batch / t_fl:,.0f} samples/s, torch {batch / t_th:,.0f} samples/s")
    if not args.quick:
        r.finish()


if __name__ == "__main__":
    main()
