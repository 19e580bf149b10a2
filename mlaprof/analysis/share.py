"""The one way a share (0..1) is printed as a percentage. Rounding never reaches an end that the
value does not: 0.9983 prints 99.8%, not 100%, and 0.002 prints 0.2%, not 0%; a view that shows
"100%" or "0%" means exactly all or none."""

from __future__ import annotations

MAX_DIGITS = 3  # past this a share next to an end prints as ">99.999%" / "<0.001%"


def share_text(x: float | None, digits: int = 0, none: str = "-") -> str:
    """``x`` (a share, 0..1) as a percentage with ``digits`` decimals, more where fewer would
    round a share short of an end onto that end."""
    if x is None or x != x:
        return none
    pct = 100.0 * float(x)
    for d in range(digits, MAX_DIGITS + 1):
        text = f"{pct:.{d}f}"
        if (0.0 < pct < 100.0) and float(text) in (0.0, 100.0):
            continue
        return f"{text}%"
    return (
        f">{100 - 10**-MAX_DIGITS:.{MAX_DIGITS}f}%"
        if pct > 50
        else f"<{10**-MAX_DIGITS:.{MAX_DIGITS}f}%"
    )
