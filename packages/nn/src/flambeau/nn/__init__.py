"""Layers, losses and :class:`Module`, written as plain Python classes over the public flambeau API.

Not implemented yet: see the nn and optim issue.
"""
