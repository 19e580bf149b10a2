"""A PNG's pixels as a numpy array (8-bit RGB or RGBA, not interlaced: what kaleido writes), for
the browser tests' screenshots. No imaging library is a dependency."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np


def pixels(path: Path) -> np.ndarray:
    """Height x width x channels (uint8) of ``path``."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, head = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    w, h, depth, color, _, _, interlace = head
    if depth != 8 or color not in (2, 6) or interlace:
        raise ValueError(f"{path}: only 8-bit RGB/RGBA, not interlaced (got {head})")
    ch = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(h, 1 + w * ch)
    out = np.zeros((h, w * ch), np.int32)
    prev = np.zeros(w * ch, np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 2:
            cur = (line + prev) & 0xFF
        else:  # 1 (sub), 3 (average), 4 (Paeth): byte by byte from the left neighbour
            cur = np.zeros_like(line)
            for x in range(len(line)):
                a = cur[x - ch] if x >= ch else 0
                b, c = prev[x], prev[x - ch] if x >= ch else 0
                if f == 1:
                    p = a
                elif f == 3:
                    p = (a + b) // 2
                else:
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    p = a if pa <= pb and pa <= pc else b if pb <= pc else c
                cur[x] = (line[x] + p) & 0xFF
        out[y], prev = cur, cur
    return out.reshape(h, w, ch).astype(np.uint8)


def near(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 8) -> np.ndarray:
    """Where ``img`` is within ``tol`` of ``rgb`` in every channel (a boolean mask)."""
    return (np.abs(img[..., :3].astype(int) - np.array(rgb)) <= tol).all(axis=-1)


def grey(img: np.ndarray, lo: int = 90, hi: int = 200, spread: int = 6) -> np.ndarray:
    """Neutral grey pixels (r = g = b within ``spread``, between ``lo`` and ``hi``): the notes'
    colour and its anti-aliased edges; the legend's and titles' blue-grey text is not."""
    rgb = img[..., :3].astype(int)
    return (rgb.max(-1) - rgb.min(-1) <= spread) & (rgb.mean(-1) >= lo) & (rgb.mean(-1) <= hi)
