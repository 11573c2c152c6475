"""The layers of :mod:`flambeau.nn`, one module per family (as ``torch.nn.modules``)."""

from flambeau.nn.modules.activation import *  # noqa: F403
from flambeau.nn.modules.adaptive import *  # noqa: F403
from flambeau.nn.modules.attention import *  # noqa: F403
from flambeau.nn.modules.batchnorm import *  # noqa: F403
from flambeau.nn.modules.channelshuffle import *  # noqa: F403
from flambeau.nn.modules.container import *  # noqa: F403
from flambeau.nn.modules.conv import *  # noqa: F403
from flambeau.nn.modules.distance import *  # noqa: F403
from flambeau.nn.modules.dropout import *  # noqa: F403
from flambeau.nn.modules.flatten import *  # noqa: F403
from flambeau.nn.modules.fold import *  # noqa: F403
from flambeau.nn.modules.linear import *  # noqa: F403
from flambeau.nn.modules.loss import *  # noqa: F403
from flambeau.nn.modules.loss_more import *  # noqa: F403
from flambeau.nn.modules.module import *  # noqa: F403
from flambeau.nn.modules.normalization import *  # noqa: F403
from flambeau.nn.modules.padding import *  # noqa: F403
from flambeau.nn.modules.pooling import *  # noqa: F403
from flambeau.nn.modules.pooling_more import *  # noqa: F403
from flambeau.nn.modules.rnn import *  # noqa: F403
from flambeau.nn.modules.sparse import *  # noqa: F403
from flambeau.nn.modules.transformer import *  # noqa: F403
from flambeau.nn.modules.upsampling import *  # noqa: F403


def __getattr__(name: str):
    # torch's torch.nn.modules.utils (``_pair`` ...), on first use: not a star-imported name, which would
    # replace flambeau.nn.utils in flambeau.nn
    if name == "utils":
        import importlib

        return importlib.import_module("flambeau.nn.modules.utils")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
