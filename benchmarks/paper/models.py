"""The six models of Table 1 of the PyTorch paper (Paszke et al., 2019, section 6.3), written once over a library.

Each builder takes ``lib`` (``torch`` or ``flambeau``) first and size arguments after it, and uses
only modules both libraries have (``nn.Conv2d``, ``BatchNorm2d``, ``MaxPool2d``, ``AdaptiveAvgPool2d``,
``Linear``, ``LSTM``, ``Embedding``, ``Dropout``, ``ReLU``, ``ReLU6``, ``Flatten``, ``Sequential``) and
``lib.cat``, ``lib.bmm``, ``lib.tanh``, ``nn.functional.softmax``:

- AlexNet (torchvision's layout: 5 convolutions, 3 fully connected layers);
- VGG-19 *with* BatchNorm (torchvision's ``vgg19_bn``: 16 convolutions in 5 stages, 3 fully connected);
- ResNet-50 (torchvision's layout: 7x7 stem and max-pool, bottleneck blocks 3-4-6-3 with the stride
  on the 3x3 convolution, "v1.5");
- MobileNet v2 (torchvision's layout: inverted residuals, depthwise 3x3, ReLU6);
- a GNMTv2-style sequence-to-sequence LSTM: source and target embeddings, an encoder whose first
  layer is bidirectional (as GNMT's) followed by unidirectional layers, an LSTM decoder (teacher
  forcing), dot-product attention of every decoder output over the encoder outputs (``bmm``,
  ``softmax``, ``bmm``), a tanh combination of output and context, and the vocabulary projection;
- NCF in its NeuMF form (MLPerf's): a matrix-factorisation branch (product of user and item
  embeddings) and an MLP branch (concatenated embeddings, 256-128-64), joined into one logit.

:data:`MODELS` gives each model's title, unit of throughput, loss, optimizer and three sizes:

- ``paper``: 224x224 images and the usual ImageNet, WMT16 and MovieLens-20M sizes. The paper gives
  no batch sizes (they are in its reproduction appendix, not in the paper), so these are the
  usual ones for a 16 GB GPU: AlexNet 128, VGG-19 64, ResNet-50 64, MobileNet v2 64, GNMT 128
  sentence pairs of 50+50 tokens, NCF 2^20 pairs;
- ``reduced``: for a 2-core CPU (one training step well under a second): 64x64 images (32x32 for
  VGG-19) and narrower layers;
- ``tiny``: for tests, dropout off.

:func:`build_pair` builds a model in torch, copies its parameters and buffers into the flambeau
one, and returns both with a step function each (zero_grad, forward, loss, backward, clipping where
the model asks for it, optimizer step).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np

__all__ = ["MODELS", "PaperModel", "Size", "alexnet", "build_pair", "gnmt", "mobilenet_v2", "ncf", "resnet50",
           "vgg19_bn"]


def _c(channels: int, width: float) -> int:
    """``channels`` scaled by ``width``, at least 4."""
    return max(4, int(round(channels * width)))


# --- the models -------------------------------------------------------------------------------------
def alexnet(lib, width=1.0, hidden=4096, pool=6, num_classes=1000, dropout=0.5):
    """Krizhevsky et al.'s AlexNet in torchvision's layout; ``width`` scales the convolutions, ``pool`` is
    the side of the adaptive average pool before the classifier (6 at 224x224)."""
    nn = lib.nn
    c = [_c(k, width) for k in (64, 192, 384, 256, 256)]
    return nn.Sequential(
        nn.Conv2d(3, c[0], 11, 4, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(c[0], c[1], 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(c[1], c[2], 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(c[2], c[3], 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(c[3], c[4], 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.AdaptiveAvgPool2d(pool), nn.Flatten(),
        nn.Dropout(dropout), nn.Linear(c[4] * pool * pool, hidden), nn.ReLU(inplace=True),
        nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.ReLU(inplace=True),
        nn.Linear(hidden, num_classes),
    )


VGG19 = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M")


def vgg19_bn(lib, width=1.0, hidden=4096, pool=7, num_classes=1000, dropout=0.5):
    """Simonyan and Zisserman's VGG-19 with BatchNorm after every convolution (torchvision's ``vgg19_bn``)."""
    nn = lib.nn
    layers, cin = [], 3
    for v in VGG19:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            cout = _c(v, width)
            layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
            cin = cout
    return nn.Sequential(
        *layers, nn.AdaptiveAvgPool2d(pool), nn.Flatten(),
        nn.Linear(cin * pool * pool, hidden), nn.ReLU(inplace=True), nn.Dropout(dropout),
        nn.Linear(hidden, hidden), nn.ReLU(inplace=True), nn.Dropout(dropout),
        nn.Linear(hidden, num_classes),
    )


def resnet50(lib, width=1.0, num_classes=1000):
    """He et al.'s ResNet-50 in torchvision's layout (bottleneck blocks, stride on the 3x3 convolution)."""
    nn, F = lib.nn, lib.nn.functional

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin, planes, stride):
            super().__init__()
            cout = planes * self.expansion
            self.conv1, self.bn1 = nn.Conv2d(cin, planes, 1, bias=False), nn.BatchNorm2d(planes)
            self.conv2, self.bn2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes)
            self.conv3, self.bn3 = nn.Conv2d(planes, cout, 1, bias=False), nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = F.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return F.relu(out + (x if self.downsample is None else self.downsample(x)))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            stem = _c(64, width)
            self.conv1 = nn.Conv2d(3, stem, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(stem)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            stages, cin = [], stem
            for i, (planes, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3))):
                planes = _c(planes, width)
                for j in range(blocks):
                    stages.append(Bottleneck(cin, planes, 2 if i > 0 and j == 0 else 1))
                    cin = planes * Bottleneck.expansion
            self.layers = nn.Sequential(*stages)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(cin, num_classes)

        def forward(self, x):
            x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
            return self.fc(self.avgpool(self.layers(x)).flatten(1))

    return ResNet()


def _round8(v: float) -> int:
    """torchvision's ``_make_divisible(v, 8)``: the nearest multiple of 8, never 10% below ``v``."""
    r = max(8, int(v + 4) // 8 * 8)
    return r + 8 if r < 0.9 * v else r


# (expansion t, channels c, repeats n, first stride s) of Sandler et al.'s Table 2
MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))


def mobilenet_v2(lib, width=1.0, num_classes=1000, dropout=0.2):
    """Sandler et al.'s MobileNet v2 in torchvision's layout; ``width`` is the width multiplier."""
    nn = lib.nn

    def unit(cin, cout, kernel=1, stride=1, groups=1, relu6=True):
        """Convolution, BatchNorm and (unless it is a block's linear bottleneck) ReLU6."""
        out = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        if relu6:
            out.append(nn.ReLU6(inplace=True))
        return out

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, t):
            super().__init__()
            mid = cin * t
            expand = unit(cin, mid) if t != 1 else []
            self.block = nn.Sequential(*expand, *unit(mid, mid, 3, stride, mid), *unit(mid, cout, relu6=False))
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = self.block(x)
            return x + y if self.residual else y

    cin = _round8(32 * width)
    body = unit(3, cin, 3, 2)
    for t, c, n, s in MOBILENET_V2:
        cout = _round8(c * width)
        for i in range(n):
            body.append(InvertedResidual(cin, cout, 1 if i else s, t))
            cin = cout
    top = _round8(1280 * max(1.0, width))
    body += unit(cin, top)
    return nn.Sequential(*body, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(dropout),
                         nn.Linear(top, num_classes))


def gnmt(lib, vocab=32_000, hidden=1024, layers=4, dropout=0.2):
    """A GNMTv2-style translation model (Wu et al., 2016; NVIDIA's GNMTv2): ``layers`` encoder LSTM layers, the
    first bidirectional, ``layers`` decoder LSTM layers, dot-product (Luong) attention over the encoder outputs
    and a projection to the vocabulary. Input: source and target token ids, ``(batch, length)`` each."""
    nn, F = lib.nn, lib.nn.functional

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_embed, self.tgt_embed = nn.Embedding(vocab, hidden), nn.Embedding(vocab, hidden)
            self.encoder_first = nn.LSTM(hidden, hidden, 1, batch_first=True, bidirectional=True)
            self.encoder = nn.LSTM(2 * hidden, hidden, layers - 1, batch_first=True)
            self.decoder = nn.LSTM(hidden, hidden, layers, batch_first=True)
            self.combine = nn.Linear(2 * hidden, hidden)
            self.dropout = nn.Dropout(dropout)
            self.project = nn.Linear(hidden, vocab)

        def forward(self, src, tgt):  # (N, S), (N, T) int64 -> (N * T, vocab) logits
            memory, _ = self.encoder_first(self.dropout(self.src_embed(src)))
            memory, _ = self.encoder(self.dropout(memory))  # (N, S, H)
            out, _ = self.decoder(self.dropout(self.tgt_embed(tgt)))  # (N, T, H)
            scores = lib.bmm(out, memory.transpose(1, 2)) * hidden ** -0.5  # (N, T, S)
            context = lib.bmm(F.softmax(scores, dim=-1), memory)  # (N, T, H)
            attended = lib.tanh(self.combine(lib.cat([out, context], 2)))
            return self.project(self.dropout(attended)).flatten(0, 1)

    return Seq2Seq()


def ncf(lib, users=138_493, items=26_744, factors=64, mlp=(256, 256, 128, 64)):
    """He et al.'s neural collaborative filtering, NeuMF form (as in MLPerf): GMF and MLP branches, one logit.
    Input: ``(batch, 2)`` int64 (user, item) pairs."""
    nn = lib.nn

    class NeuMF(nn.Module):
        def __init__(self):
            super().__init__()
            self.mf_user, self.mf_item = nn.Embedding(users, factors), nn.Embedding(items, factors)
            self.mlp_user, self.mlp_item = nn.Embedding(users, mlp[0] // 2), nn.Embedding(items, mlp[0] // 2)
            tower = []
            for cin, cout in zip(mlp[:-1], mlp[1:]):
                tower += [nn.Linear(cin, cout), nn.ReLU()]
            self.mlp = nn.Sequential(*tower)
            self.final = nn.Linear(factors + mlp[-1], 1)

        def forward(self, pairs):  # (N, 2) int64 -> (N,) logits
            user, item = pairs[:, 0], pairs[:, 1]
            mf = self.mf_user(user) * self.mf_item(item)
            deep = self.mlp(lib.cat([self.mlp_user(user), self.mlp_item(item)], 1))
            return self.final(lib.cat([mf, deep], 1)).squeeze(1)

    return NeuMF()


# --- sizes, data and training steps --------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Size:
    """One size of a model: the builder's arguments, the batch, and the input."""

    kwargs: dict
    batch: int
    image: int = 0  # the side of square RGB images (image models)
    lengths: tuple[int, int] = (0, 0)  # source and target lengths (GNMT)

    def describe(self, model: PaperModel) -> str:
        args = ", ".join(f"{k} {v}" for k, v in self.kwargs.items() if k not in ("dropout", "num_classes"))
        if model.kind == "image":
            where = f"3x{self.image}x{self.image}"
        elif model.kind == "seq2seq":
            where = f"{self.lengths[0]}+{self.lengths[1]} tokens"
        else:
            where = "pairs"
        return f"batch {self.batch}, {where}" + (f", {args}" if args else "")


@dataclasses.dataclass(frozen=True)
class PaperModel:
    """A model of Table 1: how it is built, fed, trained and counted."""

    title: str
    builder: Callable
    kind: str  # "image": (N, 3, H, W) float32 and class ids; "seq2seq": token ids; "pairs": (N, 2) ids, 0/1 labels
    unit: str  # what its throughput counts
    paper: float  # PyTorch's throughput in Table 1 (on the paper's GPU)
    sizes: dict[str, Size]
    loss: str = "cross_entropy"  # a name in nn.functional
    optimizer: str = "SGD"
    optimizer_args: dict = dataclasses.field(default_factory=lambda: {"lr": 0.01, "momentum": 0.9})
    clip_norm: float | None = None

    def items(self, size: str) -> int:
        """What one step processes, in :attr:`unit` (images, source and target tokens, samples)."""
        s = self.sizes[size]
        return s.batch * sum(s.lengths) if self.kind == "seq2seq" else s.batch

    def make_batch(self, size: str, rng: np.random.Generator) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """(inputs, targets) of one batch, as numpy arrays."""
        s = self.sizes[size]
        if self.kind == "image":
            classes = s.kwargs.get("num_classes", 1000)
            x = rng.standard_normal((s.batch, 3, s.image, s.image), dtype=np.float32)
            return (x,), rng.integers(0, classes, s.batch)
        if self.kind == "seq2seq":
            vocab = s.kwargs["vocab"]
            src, tgt = (rng.integers(0, vocab, (s.batch, n)) for n in s.lengths)
            return (src, tgt), rng.integers(0, vocab, s.batch * s.lengths[1])
        users, items = s.kwargs["users"], s.kwargs["items"]
        pairs = np.stack([rng.integers(0, users, s.batch), rng.integers(0, items, s.batch)], 1)
        return (pairs,), rng.integers(0, 2, s.batch).astype(np.float32)


def _images(paper_batch, reduced, tiny):
    """Sizes of an image model: 224x224 for the paper; ``reduced`` and ``tiny`` are (image, batch, kwargs)."""
    return {"paper": Size({}, paper_batch, 224),
            "reduced": Size({**reduced[2], "num_classes": 100}, reduced[1], reduced[0]),
            "tiny": Size({**tiny[2], "num_classes": 10}, tiny[1], tiny[0])}


_ADAM = {"optimizer": "Adam", "optimizer_args": {"lr": 1e-3}}
MODELS: dict[str, PaperModel] = {
    "alexnet": PaperModel("AlexNet", alexnet, "image", "images/s", 1547, _images(
        128, (64, 32, {"width": 0.5, "hidden": 1024, "pool": 1}),
        (64, 2, {"width": 0.125, "hidden": 32, "pool": 1, "dropout": 0.0}))),
    "vgg19": PaperModel("VGG-19 (with BatchNorm)", vgg19_bn, "image", "images/s", 119, _images(
        64, (32, 16, {"width": 0.25, "hidden": 512, "pool": 1}),
        (64, 4, {"width": 0.0625, "hidden": 32, "pool": 1, "dropout": 0.0}))),
    "resnet50": PaperModel("ResNet-50", resnet50, "image", "images/s", 212, _images(
        64, (64, 16, {"width": 0.25}), (64, 4, {"width": 0.0625}))),
    "mobilenet_v2": PaperModel("MobileNet v2", mobilenet_v2, "image", "images/s", 463, _images(
        64, (64, 16, {"width": 0.5}), (64, 4, {"width": 0.25, "dropout": 0.0}))),
    "gnmt": PaperModel("GNMTv2-style LSTM", gnmt, "seq2seq", "tokens/s", 15512, {
        "paper": Size({"vocab": 32_000, "hidden": 1024, "layers": 4}, 128, lengths=(50, 50)),
        "reduced": Size({"vocab": 4000, "hidden": 128, "layers": 2}, 16, lengths=(20, 20)),
        "tiny": Size({"vocab": 50, "hidden": 16, "layers": 2, "dropout": 0.0}, 2, lengths=(5, 4)),
    }, clip_norm=5.0, **_ADAM),
    "ncf": PaperModel("NCF (NeuMF)", ncf, "pairs", "samples/s", 5.4e6, {
        "paper": Size({"users": 138_493, "items": 26_744, "factors": 64, "mlp": (256, 256, 128, 64)}, 1 << 20),
        "reduced": Size({"users": 20_000, "items": 5_000, "factors": 32, "mlp": (128, 64, 32)}, 8192),
        "tiny": Size({"users": 30, "items": 20, "factors": 4, "mlp": (8, 8, 4)}, 8),
    }, loss="binary_cross_entropy_with_logits", **_ADAM),
}


def make_step(lib, model: PaperModel, module):
    """The training step of ``module`` with a new optimizer: a callable ``(inputs, targets) -> loss tensor``."""
    loss_fn = getattr(lib.nn.functional, model.loss)
    parameters = list(module.parameters())
    optimizer = getattr(lib.optim, model.optimizer)(parameters, **model.optimizer_args)

    def step(inputs, targets):
        optimizer.zero_grad()
        loss = loss_fn(module(*inputs), targets)
        loss.backward()
        if model.clip_norm is not None:
            lib.nn.utils.clip_grad_norm_(parameters, model.clip_norm)
        optimizer.step()
        return loss
    return step


def build_pair(torch, fl, name: str, size: str, seed: int = 0, device: str = "cpu"):
    """Model ``name`` at ``size`` in torch and in flambeau with the same parameters and buffers, on ``device``,
    with a step function each on the same fixed batch: ``(fl_module, th_module, fl_step, th_step)``."""
    model = MODELS[name]
    kwargs = model.sizes[size].kwargs
    torch.manual_seed(seed)
    th_module = model.builder(torch, **kwargs)
    fl_module = model.builder(fl, **kwargs)
    fl_module.load_state_dict({k: fl.from_numpy(v.detach().numpy().copy())
                               for k, v in th_module.state_dict().items()})
    th_module, fl_module = th_module.to(device), fl_module.to(device)
    inputs, targets = model.make_batch(size, np.random.default_rng(seed))
    th_batch = [torch.from_numpy(a).to(device) for a in inputs], torch.from_numpy(targets).to(device)
    fl_batch = [fl.from_numpy(a).to(device) for a in inputs], fl.from_numpy(targets).to(device)
    return (fl_module, th_module, functools.partial(make_step(fl, model, fl_module), *fl_batch),
            functools.partial(make_step(torch, model, th_module), *th_batch))
