"""Put first on ``sys.path`` for the flambeau runs of run_ported.py: an import of torch that the port
missed fails here instead of quietly running the program on PyTorch."""

raise ImportError("a ported program imported torch: run_ported.py runs it on flambeau only, and this import was "
                  "not rewritten")
