"""Elementwise operators: arithmetic, math, comparisons and logical operators.

Each is declared once through the factories of ``_elementwise_base``; CUDA kernels are
registered for the same names by ``flambeau._backends.cuda_kernels``.
"""

from __future__ import annotations

import numpy as np

from flambeau._ops._elementwise_base import binary_op, unary_op
from flambeau._ops._elementwise_base import cpu_binary_kernel as _b
from flambeau._ops._elementwise_base import cpu_unary_kernel as _u

# --- arithmetic ----------------------------------------------------------------------------------
ADD = binary_op("add(Tensor input, Tensor other) -> Tensor", _b(np.add),
                dunders=("__add__", "__iadd__"), rdunders=("__radd__",), category="arithmetic")
SUB = binary_op("sub(Tensor input, Tensor other) -> Tensor", _b(np.subtract),
                dunders=("__sub__", "__isub__"), rdunders=("__rsub__",), category="arithmetic")
MUL = binary_op("mul(Tensor input, Tensor other) -> Tensor", _b(np.multiply),
                dunders=("__mul__", "__imul__"), rdunders=("__rmul__",), category="arithmetic")
DIV = binary_op("div(Tensor input, Tensor other) -> Tensor", _b(np.true_divide, quiet=True), rule="float",
                dunders=("__truediv__", "__itruediv__"), rdunders=("__rtruediv__",), category="arithmetic")

# --- unary math ----------------------------------------------------------------------------------
NEG = unary_op("neg(Tensor input) -> Tensor", _u(np.negative), dunders=("__neg__",), allowed="no_bool",
               category="arithmetic")
EXP = unary_op("exp(Tensor input) -> Tensor", _u(np.exp, quiet=True), rule="float", category="math")
LOG = unary_op("log(Tensor input) -> Tensor", _u(np.log, quiet=True), rule="float", category="math")

# --- comparisons ---------------------------------------------------------------------------------
EQ = binary_op("eq(Tensor input, Tensor other) -> Tensor", _b(np.equal, bool_out=True), bool_out=True,
               dunders=("__eq__",), category="comparison")
NE = binary_op("ne(Tensor input, Tensor other) -> Tensor", _b(np.not_equal, bool_out=True), bool_out=True,
               dunders=("__ne__",), category="comparison")
LT = binary_op("lt(Tensor input, Tensor other) -> Tensor", _b(np.less, bool_out=True), bool_out=True,
               dunders=("__lt__",), category="comparison")
LE = binary_op("le(Tensor input, Tensor other) -> Tensor", _b(np.less_equal, bool_out=True), bool_out=True,
               dunders=("__le__",), category="comparison")
GT = binary_op("gt(Tensor input, Tensor other) -> Tensor", _b(np.greater, bool_out=True), bool_out=True,
               dunders=("__gt__",), category="comparison")
GE = binary_op("ge(Tensor input, Tensor other) -> Tensor", _b(np.greater_equal, bool_out=True), bool_out=True,
               dunders=("__ge__",), category="comparison")
