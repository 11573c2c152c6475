"""The families of :mod:`flambeau.nn.functional`, one module each."""
