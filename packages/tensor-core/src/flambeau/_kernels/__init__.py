"""The kernel house: every operator's kernels, per device type and operator family.

``flambeau._kernels.cpu.<family>`` holds the CPU kernels (numpy, its BLAS, numba ``@njit``) of the
operators declared in ``flambeau._ops.<family>``; ``flambeau._kernels.cuda.<family>`` their CUDA
kernels (numba.cuda, cuBLAS). Each kernel registers explicitly for its operator and device with
``@kernel("<op>", "<device>")`` (:func:`flambeau._ops._registry.kernel`, Note [One kernel table]);
the operator's front function in ``_ops`` dispatches through ``OP.kernel(device_type)``.

Direction of imports: ``_ops`` may import ``_kernels`` (a front's fast path may call its CPU
kernel directly); ``_kernels`` never imports ``_ops`` front modules, only the registry and the
leaf modules (``_dtype``, ``_parallel``, ``_blas`` ...). numba is imported on first use, never at
``import flambeau``.
"""
