"""The tensor library the shims hand data to: flambeau, or torch for the baseline run.

``run_ported.py`` sets ``PORTED_FRAMEWORK`` to ``flambeau`` (the ported run) or ``torch`` (the
same program, unmodified, under PyTorch), so the shims produce the tensors the program expects.
"""

from __future__ import annotations

import importlib
import os


def framework():
    return importlib.import_module(os.environ.get("PORTED_FRAMEWORK", "flambeau"))
