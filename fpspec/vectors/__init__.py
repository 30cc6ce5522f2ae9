"""Golden conformance vectors and the checker (docs/vectors.rst, docs/checker.rst).

* :mod:`.schema`: the file layout and tag bits (FPS-VEC-*).
* :mod:`.coverage`: the named coverage models.
* :mod:`.generate`: deterministic pack generation.
* :mod:`.pack`: manifest, hashes, pickle-free loading.
* :mod:`.checker`: the checker and its report writers (FPS-CHK-*).
* :mod:`.harness`: the in-process harness for Python / torch teams.
"""

from .pack import IntegrityError, Pack, VectorSet
from .schema import SCHEMA_VERSION, TAGS

__all__ = ["Pack", "VectorSet", "IntegrityError", "SCHEMA_VERSION", "TAGS"]
