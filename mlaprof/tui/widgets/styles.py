"""Resolved component styles, cached per widget: resolving them is most of a line-API repaint."""

from __future__ import annotations

from typing import Any

from rich.style import Style


class CachedStyles:
    """Mix into a line-API widget (before the Textual base): ``self._style(name)`` is the widget's
    style plus component class ``name`` ("" or "base": the widget's own), cached per
    :meth:`_style_key` and dropped when the theme or CSS changes."""

    def _style_key(self, name: str) -> Any:
        return name

    def _style(self, name: str) -> Style:
        cache = self.__dict__.setdefault("_styles", {})
        key = self._style_key(name)
        style = cache.get(key)
        if style is None:
            base = self.rich_style  # type: ignore[attr-defined]
            style = base if name in ("", "base") else base + self.get_component_rich_style(name)  # type: ignore[attr-defined]
            cache[key] = style
        return style

    def notify_style_update(self) -> None:
        super().notify_style_update()  # type: ignore[misc]
        self.__dict__.get("_styles", {}).clear()
        self.refresh()  # type: ignore[attr-defined]
