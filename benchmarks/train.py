"""Training-step benchmarks: whole models in flambeau against the same models in PyTorch, 2 threads each.

One step is ``zero_grad``, forward, the loss, backward (gradient clipping where the model asks
for it) and an optimizer step, on a fixed batch of float32 data (int64 token ids for the sequence
models). Each model is written once, over a library argument (``lib.nn``,
``lib.optim``), and built twice: in torch, then in flambeau with torch's initial parameters copied
in, so both sides run the same arithmetic. Before timing, one step on each side checks that the
two losses agree. The rows time the two libraries interleaved in one process; a full run also times
each alone in processes of its own and gives that ratio in the notes (Note [Libraries slow each
other]).

- MLP 784-1024-1024-10, batch 128, SGD with momentum;
- LeNet-style CNN (conv 32 and 64 3x3, max-pool, fc 128) on 1x28x28, batch 64, SGD with momentum;
- CIFAR ResNet-18 layout with widths 32-64-128-256 and BatchNorm, on 3x32x32, batch 32, SGD with momentum;
- MobileNetV2 (width 0.5) on 3x64x64, batch 16, SGD with momentum;
- 2-layer LSTM language model (vocabulary 10k, 256 hidden, 35 steps, batch 20), SGD with
  gradient-norm clipping at 0.25;
- NCF (10k users and items, 64-dim embeddings, MLP 128-64-32-1, batch 4096), binary
  cross-entropy with logits, Adam;
- a small GPT (4 layers, 4 heads, d_model 128, context 64, vocabulary 1000, batch 32), AdamW.

    nox -s bench                         # all benchmark scripts, results into RESULTS.md
    python benchmarks/train.py --quick   # fewer repeats, RESULTS.md untouched
    python benchmarks/train.py --only resnet18
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import statistics
import subprocess
import sys
from collections.abc import Callable

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported
import numpy as np

import flambeau as fl
import flambeau.nn  # noqa: F401
import flambeau.optim  # noqa: F401


# --- models, written once over the library ---------------------------------------------------------
def mlp(lib, sizes=(784, 1024, 1024, 10)):
    nn = lib.nn
    layers = []
    for cin, cout in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(cin, cout), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def lenet(lib, channels=(32, 64), hidden=128, image=28, num_classes=10):
    nn = lib.nn
    side = (image - 4) // 2
    return nn.Sequential(
        nn.Conv2d(1, channels[0], 3), nn.ReLU(), nn.Conv2d(channels[0], channels[1], 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(channels[1] * side * side, hidden), nn.ReLU(), nn.Linear(hidden, num_classes),
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


# MobileNetV2's inverted-residual stages: (expansion t, channels c, blocks n, first stride s)
MOBILENET_V2_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                       (6, 320, 1, 1))


def mobilenet_v2(lib, width=0.5, num_classes=10, stages=MOBILENET_V2_STAGES):
    """Sandler et al.'s MobileNetV2 (torchvision's layout: inverted residuals, ReLU6, depthwise 3x3);
    ``stages`` shortens it for tests."""
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

    cin, last = _divisible(32 * width), _divisible(1280 * max(1.0, width))
    features = conv_bn(3, cin, 3, 2)
    for t, c, n, s in stages:
        cout = _divisible(c * width)
        for i in range(n):
            features.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
            cin = cout
    features += conv_bn(cin, last, 1, 1)
    head = [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(last, num_classes)]
    return nn.Sequential(*features, *head)


def lstm_lm(lib, vocab=10_000, hidden=256, layers=2):
    """The word-language-model of PyTorch's examples: embedding, 2-layer LSTM, decoder to the vocabulary."""
    nn = lib.nn

    class LanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(vocab, hidden)
            self.rnn = nn.LSTM(hidden, hidden, layers)
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, tokens):  # (seq, batch) int64 -> (seq * batch, vocab)
            out, _ = self.rnn(self.encoder(tokens))
            return self.decoder(out).flatten(0, 1)

    return LanguageModel()


def ncf(lib, users=10_000, items=10_000, dim=64):
    """He et al.'s neural collaborative filtering (the MLP tower): user and item embeddings, MLP to a logit."""
    nn = lib.nn

    class NCF(nn.Module):
        def __init__(self):
            super().__init__()
            self.users = nn.Embedding(users, dim)
            self.items = nn.Embedding(items, dim)
            self.mlp = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(),
                                     nn.Linear(32, 1))

        def forward(self, pairs):  # (batch, 2) int64 -> (batch,) logits
            both = lib.cat([self.users(pairs[:, 0]), self.items(pairs[:, 1])], 1)
            return self.mlp(both).squeeze(1)

    return NCF()


def gpt(lib, vocab=1000, context=64, d_model=128, heads=4, layers=4):
    """A small GPT-2 layout: token and position embeddings, pre-norm causal self-attention blocks."""
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)
            self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d_model, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(vocab, d_model)
            self.positions = nn.Embedding(context, d_model)
            self.blocks = nn.Sequential(*(Block() for _ in range(layers)))
            self.ln = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab, bias=False)

        def forward(self, idx):  # (batch, context) int64 -> (batch * context, vocab)
            x = self.tokens(idx) + self.positions(lib.arange(idx.shape[1], device=idx.device))
            return self.head(self.ln(self.blocks(x))).flatten(0, 1)

    return GPT()


@dataclasses.dataclass(frozen=True)
class Spec:
    """How one benchmark model is fed and trained."""

    title: str
    builder: Callable
    batch: int
    make_batch: Callable  # numpy Generator -> (inputs, targets) as numpy arrays
    setup: str  # the size column of the table
    loss: str = "cross_entropy"  # a name in nn.functional, called as loss(output, targets)
    optimizer: str = "SGD"
    optimizer_args: dict = dataclasses.field(default_factory=lambda: {"lr": 0.01, "momentum": 0.9})
    clip_norm: float | None = None
    sizes: dict = dataclasses.field(default_factory=dict)  # the builder's keyword arguments (none: its defaults)

    def build(self, lib):
        """The model in ``lib`` (torch or flambeau), on the CPU."""
        return self.builder(lib, **self.sizes)


def _images(batch, *shape):
    return lambda rng: (rng.standard_normal((batch, *shape), dtype=np.float32), rng.integers(0, 10, batch))


def _tokens(shape, vocab):
    return lambda rng: (rng.integers(0, vocab, shape), rng.integers(0, vocab, int(np.prod(shape))))


def _pairs(batch, users, items):
    def make(rng):
        pairs = np.stack([rng.integers(0, users, batch), rng.integers(0, items, batch)], 1)
        return pairs, rng.integers(0, 2, batch).astype(np.float32)
    return make


MODELS = {
    "mlp": Spec("MLP 784-1024-1024-10", mlp, 128, _images(128, 784), "batch 128, SGD momentum"),
    "lenet": Spec("LeNet-style CNN, 1x28x28", lenet, 64, _images(64, 1, 28, 28), "batch 64, SGD momentum"),
    "resnet18": Spec("ResNet-18 (32-64-128-256), 3x32x32", resnet18, 32, _images(32, 3, 32, 32),
                     "batch 32, SGD momentum"),
    "mobilenet_v2": Spec("MobileNetV2 x0.5, 3x64x64", mobilenet_v2, 16, _images(16, 3, 64, 64),
                         "batch 16, SGD momentum"),
    "lstm_lm": Spec("LSTM LM, 2x256, vocab 10k", lstm_lm, 20, _tokens((35, 20), 10_000),
                    "seq 35, batch 20, SGD, clip 0.25", optimizer_args={"lr": 1.0}, clip_norm=0.25),
    "ncf": Spec("NCF, 10k users/items, dim 64", ncf, 4096, _pairs(4096, 10_000, 10_000), "batch 4096, Adam",
                loss="binary_cross_entropy_with_logits", optimizer="Adam", optimizer_args={"lr": 1e-3}),
    "gpt": Spec("GPT 4x4 heads, d 128, ctx 64, vocab 1k", gpt, 32, _tokens((32, 64), 1000), "batch 32, AdamW",
                optimizer="AdamW", optimizer_args={"lr": 3e-4}),
}


def _at_gpu_size(name: str, title: str, sizes: dict, batch: int, make_batch, setup: str) -> Spec:
    return dataclasses.replace(MODELS[name], title=title, sizes=sizes, batch=batch, make_batch=make_batch, setup=setup)


# The same seven models at sizes one trains them at on a GPU (``benchmarks/gpu.py --size gpu``). The sizes
# above suit two CPU cores; on a GPU their steps leave the device idle, and time the host path of both
# libraries rather than training. These are the models' usual configurations: the full ResNet-18 on CIFAR
# images, MobileNetV2 at width 1.0, the "medium" LSTM language model of Zaremba et al. (2 x 650), NCF over
# MovieLens-20M's users and items, and the character-level GPT of nanoGPT's Shakespeare configuration.
GPU_MODELS = {
    "mlp": _at_gpu_size("mlp", "MLP 784-4096-4096-10", {"sizes": (784, 4096, 4096, 10)}, 1024, _images(1024, 784),
                        "batch 1024, SGD momentum"),
    "lenet": _at_gpu_size("lenet", "LeNet-style CNN, 1x28x28", {}, 1024, _images(1024, 1, 28, 28),
                          "batch 1024, SGD momentum"),
    "resnet18": _at_gpu_size("resnet18", "ResNet-18 (64-128-256-512), 3x32x32", {"widths": (64, 128, 256, 512)},
                             128, _images(128, 3, 32, 32), "batch 128, SGD momentum"),
    "mobilenet_v2": _at_gpu_size("mobilenet_v2", "MobileNetV2 x1.0, 3x96x96", {"width": 1.0}, 128,
                                 _images(128, 3, 96, 96), "batch 128, SGD momentum"),
    "lstm_lm": _at_gpu_size("lstm_lm", "LSTM LM, 2x650, vocab 10k", {"hidden": 650}, 64, _tokens((35, 64), 10_000),
                            "seq 35, batch 64, SGD, clip 0.25"),
    "ncf": _at_gpu_size("ncf", "NCF, 138k users, 27k items, dim 64", {"users": 138_493, "items": 26_744}, 65_536,
                        _pairs(65_536, 138_493, 26_744), "batch 65536, Adam"),
    "gpt": _at_gpu_size("gpt", "GPT 6x6 heads, d 384, ctx 256, vocab 65",
                        {"vocab": 65, "context": 256, "d_model": 384, "heads": 6, "layers": 6}, 64,
                        _tokens((64, 256), 65), "batch 64, AdamW"),
}


def train_step(lib, spec: Spec, model, optimizer, x, y):
    """One optimizer step of ``spec``; returns the loss tensor."""
    loss_fn = getattr(lib.nn.functional, spec.loss)
    parameters = list(model.parameters())

    def step():
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        if spec.clip_norm is not None:
            lib.nn.utils.clip_grad_norm_(parameters, spec.clip_norm)
        optimizer.step()
        return loss
    return step


def build_pair(torch, name: str, seed: int = 0, device: str = "cpu", models: dict = MODELS):
    """The model in torch and in flambeau with the same parameters and buffers, and their step functions,
    each library's model and batch on ``device`` ("cpu" or "cuda"); ``models``: :data:`MODELS` or
    :data:`GPU_MODELS`."""
    spec = models[name]
    torch.manual_seed(seed)
    th_model = spec.build(torch)
    fl_model = spec.build(fl)
    fl_model.load_state_dict({k: fl.from_numpy(v.detach().numpy().copy()) for k, v in th_model.state_dict().items()})
    th_model, fl_model = th_model.to(device), fl_model.to(device)
    x, y = spec.make_batch(np.random.default_rng(seed))
    th_opt = getattr(torch.optim, spec.optimizer)(th_model.parameters(), **spec.optimizer_args)
    fl_opt = getattr(fl.optim, spec.optimizer)(fl_model.parameters(), **spec.optimizer_args)
    th_step = train_step(torch, spec, th_model, th_opt, torch.from_numpy(x).to(device), torch.from_numpy(y).to(device))
    fl_step = train_step(fl, spec, fl_model, fl_opt, fl.from_numpy(x).to(device), fl.from_numpy(y).to(device))
    return fl_model, th_model, fl_step, th_step


def check_same_loss(fl_model, th_model, fl_step, th_step) -> float:
    """One step on each side (dropout off): the losses must agree before the timings mean anything."""
    fl_model.eval(), th_model.eval()  # noqa: B018 - dropout off for the check; BatchNorm uses running stats
    torch = sys.modules.get("torch")
    on_gpu = torch is not None and any(p.is_cuda for p in th_model.parameters())
    # cuDNN's RNN backward refuses a model in eval mode: torch's own kernels do the check step there, and
    # flambeau's convolutions run without TF32 (torch's own kernels have none) so that both are float32
    tf32 = fl.backends.cudnn.allow_tf32
    fl.backends.cudnn.allow_tf32 = False
    try:
        with torch.backends.cudnn.flags(enabled=False) if on_gpu else contextlib.nullcontext():
            a, b = float(fl_step().item()), float(th_step().item())
    finally:
        fl.backends.cudnn.allow_tf32 = tf32
    fl_model.train(), th_model.train()  # noqa: B018
    if not np.isclose(a, b, rtol=1e-3, atol=1e-4):
        raise SystemExit(f"losses differ: flambeau {a:.6f}, torch {b:.6f} — fix correctness before timing")
    return a


def _time_alone(library: str, name: str, repeat: int) -> float:
    """Median step time of ``library`` alone on model ``name``, in a process of its own."""
    done = subprocess.run([sys.executable, __file__, "--alone", library, "--repeat", str(repeat), "--only", name],
                          capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


def separate_processes(name: str, rounds: int, repeat: int) -> tuple[float, float]:
    """Medians over ``rounds`` of each library timed alone, alternating which goes first.

    Note [Libraries slow each other]: interleaved in one process, each library runs in the wake of
    the other's idle threads (spinning OpenMP or BLAS workers) and cache footprint; measured here,
    torch's steps right after flambeau's were up to 1.7x slower than alone. The separate-process
    figures show that the interleaved ratio does not flatter either side.
    """
    times = {"flambeau": [], "torch": []}
    for k in range(rounds):
        for library in (("flambeau", "torch") if k % 2 == 0 else ("torch", "flambeau")):
            times[library].append(_time_alone(library, name, repeat))
    return statistics.median(times["flambeau"]), statistics.median(times["torch"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats, RESULTS.md untouched, no separate processes")
    parser.add_argument("--only", choices=sorted(MODELS), action="append", help="run only these models")
    parser.add_argument("--alone", choices=("flambeau", "torch"), help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    repeat = args.repeat or (3 if args.quick else 7)
    r = _harness.Report("train", "Training steps (benchmarks/train.py)", repeat=repeat, target=0.2)
    torch = r.torch
    if torch is None:
        raise SystemExit("benchmarks/train.py needs torch: it builds each model in torch first")
    if args.alone:  # a child of separate_processes: one library, one model, its median on stdout
        _, _, fl_step, th_step = build_pair(torch, args.only[0])
        print(r.median(fl_step if args.alone == "flambeau" else th_step))
        return
    r.header()
    for name in args.only or MODELS:
        spec = MODELS[name]
        fl_model, th_model, fl_step, th_step = build_pair(torch, name)
        check_same_loss(fl_model, th_model, fl_step, th_step)
        t_fl, t_th = r.compare(spec.title, spec.setup, fl_step, th_step)
        note = f"{spec.title}: flambeau {spec.batch / t_fl:,.0f} samples/s, torch {spec.batch / t_th:,.0f} samples/s"
        if not args.quick:
            a_fl, a_th = separate_processes(name, rounds=3, repeat=5)
            note += (f"; each alone in its own process (3 alternating rounds): {_harness.fmt_time(a_fl)} "
                     f"against {_harness.fmt_time(a_th)}, ratio {a_fl / a_th:.2f}")
        r.add_note(note)
    if not args.quick:
        r.add_note("Rows: interleaved in one process (Note [Libraries slow each other] in train.py); the notes "
                   "also time each library alone in a process of its own.")
        r.finish()


if __name__ == "__main__":
    main()
