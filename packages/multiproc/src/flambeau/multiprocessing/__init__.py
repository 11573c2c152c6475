"""A drop-in replacement for :mod:`multiprocessing` that moves tensors through shared memory.

Not implemented yet: see the multiproc and data issue.
"""
