"""Reverse-mode automatic differentiation for flambeau (section 4.3 of the PyTorch paper).

The engine and the derivative table of every differentiable operator of flambeau-tensor-core
live here; tensor-core only exposes the seam they plug into. Not implemented yet: see the
autograd issue.
"""
