"""The dashboard's millisecond cells keep a small layer's value: a 13.5 µs layer read 0.013
(the report's 13.5 µs), a 0.4 µs one 0.000."""

from __future__ import annotations

import pytest

from mlaprof.tui.fmt import fmt_ms


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0.0135, "0.0135"),
        (0.0004, "0.0004"),
        (0.53, "0.530"),
        (2.5, "2.500"),
        (12.34, "12.3"),
        (None, "-"),
    ],
)
def test_fmt_ms(ms: float | None, text: str) -> None:
    assert fmt_ms(ms) == text
