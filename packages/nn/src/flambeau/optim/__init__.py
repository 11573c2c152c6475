"""Optimizers and learning-rate schedulers.

Not implemented yet: see the nn and optim issue.
"""
