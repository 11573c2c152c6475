"""Rank program of test_launcher.py: a DDP training loop in which one rank misbehaves at step 2.

Usage: ``rank_fail.py MODE`` with MODE one of
  ok      finish normally (rank 0 prints the torchrun variables it got);
  kill    rank 1 SIGKILLs itself in the middle of backward;
  raise   rank 1 raises an exception;
  hang    rank 1 skips a collective and sleeps (the group's timeout is 3 s);
  stop    rank 1 SIGSTOPs itself (it can no longer answer anyone);
  exit    rank 0 ends its program while rank 1 still runs collectives;
  loop    every rank prints "ready" and trains until it is interrupted.
"""

from __future__ import annotations

import datetime
import os
import signal
import sys
import time

import flambeau as fl
import flambeau.distributed as dist
import flambeau.nn as nn
import flambeau.nn.functional as F
from flambeau.nn.parallel import DistributedDataParallel as DDP

mode = sys.argv[1]
timeout = datetime.timedelta(seconds=3 if mode in ("hang", "stop") else 60)
dist.init_process_group("mpi", timeout=timeout)
rank = dist.get_rank()
if mode == "ok" and rank == 0:
    print("env", {k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                              "OMP_NUM_THREADS")}, "argv", sys.argv[1:], flush=True)
if mode == "exit" and rank == 0:
    sys.exit(0)

model = DDP(nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2)),
            bucket_cap_mb=0.01)
optimizer = fl.optim.SGD(model.parameters(), lr=0.01)


def misbehave(grad):
    if step == 2 and rank == 1:
        if mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
    return None


model.module[2].weight.register_hook(misbehave)  # fires in the middle of backward
step = 0
while mode == "loop" or step < 5:
    if mode == "loop" and step == 1:
        print(f"ready {rank}", flush=True)
    if step == 2 and rank == 1:
        if mode == "raise":
            raise RuntimeError("boom from rank 1")
        if mode == "hang":
            time.sleep(60)
    if step == 2 and mode == "hang" and rank == 0:
        dist.all_reduce(fl.ones(3))  # rank 1 never calls it
    optimizer.zero_grad()
    F.mse_loss(model(fl.randn(4, 8)), fl.randn(4, 2)).backward()
    optimizer.step()
    step += 1
    if mode == "loop":
        time.sleep(0.01)
print(f"rank {rank} done", flush=True)
