"""The one exception type fpspec raises for bad input (FPS-CLI-2)."""

from __future__ import annotations

__all__ = ["FpspecError"]


class FpspecError(ValueError):
    """Bad input, with where it is.

    ``index`` is the first offending element as a tuple (or None when the problem
    is not tied to one element); the message always says what is wrong and where,
    in one line, so the CLI can print it as is and exit with status 2.
    """

    def __init__(self, message: str, index: tuple[int, ...] | None = None):
        if index is not None:
            message = f"{message} (first at index {list(index)})"
        super().__init__(message)
        self.index = index
