"""Functional forms of the layers, activations and losses: ``import flambeau.nn.functional as F``.

Each family lives in its own module under ``flambeau.nn._functional``; this module gathers them.
"""

from flambeau.nn._functional.activation import *  # noqa: F403
from flambeau.nn._functional.attention import *  # noqa: F403
from flambeau.nn._functional.basic import *  # noqa: F403
from flambeau.nn._functional.basic_more import *  # noqa: F403
from flambeau.nn._functional.conv import *  # noqa: F403
from flambeau.nn._functional.grid import *  # noqa: F403
from flambeau.nn._functional.loss import *  # noqa: F403
from flambeau.nn._functional.loss_more import *  # noqa: F403
from flambeau.nn._functional.norm import *  # noqa: F403
from flambeau.nn._functional.pooling import *  # noqa: F403
from flambeau.nn._functional.pooling_more import *  # noqa: F403
from flambeau.nn._functional.resample import *  # noqa: F403
