"""What ``mlaprof check`` gates: the target callable, named ``MODULE:CALLABLE``, and the random
tensors ``--shapes`` builds for it (``--setup`` turns them into its arguments)."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from mlaprof.errors import MlaprofError

DTYPES = {"float32": "float32", "fp32": "float32", "bf16": "bfloat16", "bfloat16": "bfloat16",
          "fp16": "float16", "float16": "float16", "int32": "int32", "int64": "int64"}  # fmt: skip


def load_target(spec: str) -> Callable[..., Any]:
    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise MlaprofError(f"give MODULE:CALLABLE, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(mod_name)
    except ImportError as e:
        raise MlaprofError(f"cannot import {mod_name!r}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise MlaprofError(f"{mod_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise MlaprofError(f"{spec} is not callable")
    return obj


def parse_shapes(text: str, device: str) -> tuple[list[Any], dict[str, Any]]:
    import torch

    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    g = torch.Generator().manual_seed(0)
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, eq, rest = item.rpartition("=")
        dims_s, _, dt = rest.partition(":")
        if eq and not name.isidentifier():
            raise MlaprofError(f"--shapes: {name!r} is not an argument name")
        try:
            dims = [int(d) for d in dims_s.lower().split("x")]
        except ValueError:
            raise MlaprofError(f"--shapes: {rest!r} is not DIMxDIM[:dtype]") from None
        if any(d < 0 for d in dims) or len(dims) > 8:
            raise MlaprofError(f"--shapes: bad dimensions {dims_s!r}")
        if dt and dt not in DTYPES:
            raise MlaprofError(f"--shapes: unknown dtype {dt!r}; choose from {', '.join(DTYPES)}")
        dtype = getattr(torch, DTYPES.get(dt or "float32", "float32"))
        if dtype.is_floating_point:
            t = torch.randn(*dims, generator=g).to(device=device, dtype=dtype)
        else:
            t = torch.randint(0, 16, dims, generator=g).to(device=device, dtype=dtype)
        if eq:
            kwargs[name] = t
        else:
            args.append(t)
    return args, kwargs


def as_call(value: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(value, dict):
        return (), value
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[1], dict)
        and isinstance(value[0], (tuple, list))
    ):
        return tuple(value[0]), value[1]
    if isinstance(value, (tuple, list)):
        return tuple(value), {}
    raise MlaprofError(
        f"--setup must return a dict, a tuple or (tuple, dict), got {type(value).__name__}"
    )
