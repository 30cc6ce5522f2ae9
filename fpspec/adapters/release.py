"""A package's release as (major, minor), for the adapters whose declaration depends on it."""

from __future__ import annotations

from ..errors import FpspecError

__all__ = ["major_minor"]


def major_minor(package: str, version: str) -> tuple[int, int]:
    """(major, minor) of a version string such as ``2.11.0+cu130`` or ``0.7.0``; a clear
    error naming the package when it cannot be read."""
    try:
        major, minor = (int(p) for p in version.split("+")[0].split(".")[:2])
    except ValueError:
        raise FpspecError(f"cannot read a release of {package} from the version {version!r}") from None
    return major, minor
