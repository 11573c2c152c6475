"""Training steps on a CUDA GPU: the seven models of train.py, flambeau against torch on the same card.

Each model is built in torch and copied into flambeau (train.py's ``build_pair``), both on
``cuda``; one step on each side checks that the losses agree; then steps are timed interleaved
(flambeau, torch, flambeau ...), each timed call being one training step followed by the device's
``synchronize`` so that queued work is counted. Rows give the median step time and the ratio; the
notes give throughput and the allocators' statistics over the timed steps: raw device allocations
(``num_device_alloc``: the caching allocator should make none after the first step) and peak memory.

    python benchmarks/gpu.py            # all models, RESULTS.md section "gpu" rewritten
    python benchmarks/gpu.py --quick --only resnet18
    python benchmarks/gpu.py --size gpu # the models at the sizes one trains them at on a GPU
                                        # (train.GPU_MODELS; RESULTS.md section "gpu_size")
    python benchmarks/gpu.py --quick --cudnn-benchmark  # both libraries with cuDNN's benchmark mode on
                                        # (``backends.cudnn.benchmark = True``; RESULTS.md untouched)

train.py's sizes suit two CPU cores: on a GPU their steps are too small to keep the device busy, so
they time each library's host path per operator. ``--size gpu`` times the same models at their usual
GPU configurations, where the device's work counts.

Needs a CUDA GPU, numba-cuda and a CUDA build of torch; otherwise it prints why and measures nothing.
"""

from __future__ import annotations

import argparse
import traceback

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported
import train

import flambeau as fl


def _stats(torch) -> tuple[int, int, int, int]:
    """(flambeau raw allocations, flambeau peak bytes, torch raw allocations, torch peak bytes) so far."""
    fs, ts = fl.cuda.memory_stats(), torch.cuda.memory_stats()
    return (fs.get("num_device_alloc", -1), fl.cuda.max_memory_allocated(),
            ts.get("num_device_alloc", -1), torch.cuda.max_memory_allocated())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats, RESULTS.md untouched")
    parser.add_argument("--only", choices=sorted(train.MODELS), action="append", help="run only these models")
    parser.add_argument("--size", choices=("cpu", "gpu"), default="cpu",
                        help="train.py's sizes (cpu, the default) or train.GPU_MODELS's (gpu)")
    parser.add_argument("--cudnn-benchmark", action="store_true",
                        help="cuDNN's benchmark mode in both libraries (RESULTS.md untouched)")
    args = parser.parse_args()
    models = train.GPU_MODELS if args.size == "gpu" else train.MODELS
    section, title = (("gpu_size", "Training steps on a GPU at GPU sizes (benchmarks/gpu.py --size gpu)")
                      if args.size == "gpu" else ("gpu", "Training steps on a GPU (benchmarks/gpu.py)"))
    r = _harness.Report(section, title, repeat=3 if args.quick else 7, target=0.3)
    torch = _harness.cuda_torch(r)
    if torch is None:
        return
    r.add_note(f"GPU: {fl.cuda.get_device_name()} (torch sees {torch.cuda.get_device_name()}), "
               f"torch CUDA {torch.version.cuda}")
    if args.cudnn_benchmark:  # (each library then times its convolution engines on a configuration's first call)
        fl.backends.cudnn.benchmark = torch.backends.cudnn.benchmark = True
        r.add_note("cuDNN benchmark mode on in both libraries (backends.cudnn.benchmark = True)")
    r.header()
    for name in args.only or train.MODELS:
        try:
            _measure(r, torch, name, models)
        except Exception:  # one model's failure must not hide the others' figures (a lent GPU is scarce)
            print(f"benchmarks/gpu.py: {name} failed:\n{traceback.format_exc()}", flush=True)
    if not args.quick and not args.cudnn_benchmark:
        r.finish()


def _measure(r, torch, name: str, models: dict) -> None:
    """Check that the losses agree, then time ``name``'s training step of ``models`` (train.MODELS or
    train.GPU_MODELS) on both sides and add its row."""
    spec = models[name]
    fl_model, th_model, fl_step, th_step = train.build_pair(torch, name, device="cuda", models=models)
    train.check_same_loss(fl_model, th_model, fl_step, th_step)

    def fl_call(step=fl_step):
        step()
        fl.cuda.synchronize()

    def th_call(step=th_step):
        step()
        torch.cuda.synchronize()

    fl_call(), th_call()  # the first step allocates; the allocators' counts start after it
    fl.cuda.reset_peak_memory_stats()
    torch.cuda.reset_peak_memory_stats()
    before = _stats(torch)
    syncs = fl.cuda.host_sync_count()
    t_fl, t_th = r.compare(spec.title, spec.setup, fl_call, th_call)
    after = _stats(torch)
    r.add_note(f"{spec.title}: flambeau {spec.batch / t_fl:,.0f} samples/s, torch {spec.batch / t_th:,.0f} "
               f"samples/s; raw device allocations during the timed steps: flambeau "
               f"{after[0] - before[0]}, torch {after[2] - before[2]}; peak allocated: flambeau "
               f"{after[1] / 2**20:.1f} MiB, torch {after[3] / 2**20:.1f} MiB; flambeau host syncs "
               f"{fl.cuda.host_sync_count() - syncs} (one explicit synchronize per timed step)")


if __name__ == "__main__":
    main()
