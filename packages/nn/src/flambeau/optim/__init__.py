"""Optimizers and learning-rate schedulers (``torch.optim``).

An optimizer updates the tensors it was given from their ``.grad`` at each :meth:`Optimizer.step`;
:mod:`flambeau.optim.lr_scheduler` adjusts the learning rates of its parameter groups over
training. Updates of float32/float64 CPU parameters run as one fused numba kernel per parameter
(Note [Fused optimizer kernels] in ``flambeau/optim/_kernels.py``), following torch's formulas
operation for operation.
"""

from flambeau.optim import lr_scheduler, swa_utils  # noqa: F401
from flambeau.optim.adadelta import Adadelta
from flambeau.optim.adafactor import Adafactor
from flambeau.optim.adagrad import Adagrad
from flambeau.optim.adam import Adam
from flambeau.optim.adamax import Adamax
from flambeau.optim.adamw import AdamW
from flambeau.optim.asgd import ASGD
from flambeau.optim.lbfgs import LBFGS
from flambeau.optim.muon import Muon
from flambeau.optim.nadam import NAdam
from flambeau.optim.optimizer import Optimizer
from flambeau.optim.radam import RAdam
from flambeau.optim.rmsprop import RMSprop
from flambeau.optim.rprop import Rprop
from flambeau.optim.sgd import SGD
from flambeau.optim.sparse_adam import SparseAdam

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
           "Rprop", "ASGD", "LBFGS", "SparseAdam", "Adafactor", "Muon", "lr_scheduler", "swa_utils"]
