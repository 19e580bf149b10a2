"""The event categories of a PyTorch profiler (Kineto) trace that mlaprof reads: the kineto
reader's rows, and what tells a trace-event file as Kineto's where its header keys are missing
(libkineto's ``ActivityType`` names, lower case, as its JSON writer puts them in ``cat``)."""

from __future__ import annotations

KERNEL_CATS = frozenset({"kernel", "gpu_kernel"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "gpu_memset"})
API_CATS = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "user_annotation", "cpu_op"})
