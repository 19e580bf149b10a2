"""What marks a PyTorch profiler (Kineto) trace: the keys libkineto's JSON writer opens every
trace with (output_json.cpp, ``ChromeTraceLogger::handleTraceStart``: ``schemaVersion``, and
on a GPU ``deviceProperties``), and the event categories mlaprof reads (libkineto's
``ActivityType`` names, lower case, as the writer puts them in ``cat``): the kineto reader's
rows, and what tells a trace-event file as Kineto's where its header keys are missing."""

from __future__ import annotations

KERNEL_CATS = frozenset({"kernel", "gpu_kernel"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "gpu_memset"})
API_CATS = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "user_annotation", "cpu_op"})
HEADER_KEYS = ("schemaVersion", "deviceProperties")
