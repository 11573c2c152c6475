"""Datasets, samplers and a parallel DataLoader.

Not implemented yet: see the multiproc and data issue.
"""
