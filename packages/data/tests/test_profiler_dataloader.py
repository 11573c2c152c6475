"""DataLoader batches and worker waits in the profiler."""

from __future__ import annotations

import flambeau as fl
from flambeau.data import DataLoader, TensorDataset
from flambeau.profiler import profile


def test_batches_and_worker_waits_are_spans():
    data = TensorDataset(fl.arange(12.0).reshape(6, 2))
    with profile() as prof:
        single = list(DataLoader(data, batch_size=2))
        multi = list(DataLoader(data, batch_size=2, num_workers=1))
    counts = {e.key: e.count for e in prof.key_averages()}
    assert len(single) == len(multi) == 3
    # three batches and the StopIteration call each
    assert counts["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"] == 4
    assert counts["enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"] == 4
    assert counts["DataLoader worker wait"] >= 3
