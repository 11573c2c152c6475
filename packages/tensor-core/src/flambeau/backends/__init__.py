"""``flambeau.backends``: the switches PyTorch programs set under ``torch.backends``.

``fl.backends.cudnn.benchmark = True``, ``fl.backends.cudnn.deterministic = True``,
``fl.backends.cuda.matmul.allow_tf32 = True`` ... read and write the flags of
``flambeau._determinism``, where the kernels look them up (Note [What the flags change] there says
which flags change what flambeau does and which are only recorded). ``mps`` is never available.
"""

from flambeau.backends import cpu, cuda, cudnn, mps, opt_einsum

__all__ = ["cpu", "cuda", "cudnn", "mps", "opt_einsum"]
