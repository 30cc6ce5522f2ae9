"""Writing and reading vector sets and the pack manifest (FPS-VEC-1, FPS-VEC-5, FPS-VEC-6).

Sets are written byte-reproducibly: entries in a fixed order, stored (no
compression), every zip timestamp 1980-01-01 00:00:00, Unix attributes 0644,
``.npy`` format 1.0.  Reading never executes code (``allow_pickle=False``) and
refuses a manifest entry whose path leaves the pack folder.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from .. import SPEC_VERSION
from ..errors import FpspecError
from ..io import load_npz, write_text
from .schema import (GENERATOR_VERSION, META_ENTRY, SCHEMA_VERSION, SET_NAME, TAG_DOC, TAGS,
                     decode_meta, encode_meta, validate_set_arrays)

__all__ = ["VectorSet", "IntegrityError", "write_npz", "set_bytes", "write_manifest", "Pack",
           "MANIFEST", "sha256_file", "pack_id_of"]

MANIFEST = "MANIFEST.json"
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


class IntegrityError(FpspecError):
    """A pack or results file that is corrupt, tampered with, or from another pack (exit 3)."""


@dataclass
class VectorSet:
    """One set in memory: its meta and its arrays (inputs, outputs, tags, key)."""

    name: str
    meta: dict[str, Any]
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    tags: np.ndarray
    key: np.ndarray | None = None
    sha256: str = ""
    path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def cases(self) -> int:
        return int(self.tags.shape[0])

    def keys(self) -> np.ndarray:
        """The stable key of every case as uint64 (FPS-VEC-3)."""
        if self.meta["key"] == "array":
            assert self.key is not None
            return self.key
        return self.inputs[self.meta["key"][6:]].astype(np.uint64)

    def arrays(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {"tags": self.tags}
        if self.key is not None:
            out["key"] = self.key
        out.update({f"in_{k}": v for k, v in self.inputs.items()})
        out.update({f"out_{k}": v for k, v in self.outputs.items()})
        return out


def write_npz(path_or_buf: Any, entries: list[tuple[str, np.ndarray]]) -> None:
    """Write an uncompressed .npz with fixed timestamps, in the given entry order."""
    with zipfile.ZipFile(path_or_buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, arr in entries:
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arr), version=(1, 0), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_STORED
            info.create_system = 3
            info.external_attr = 0o100644 << 16
            zf.writestr(info, buf.getvalue())


def set_bytes(vs: VectorSet) -> bytes:
    """The exact file content of a set: __meta__, tags, key, inputs, outputs (sorted)."""
    entries: list[tuple[str, np.ndarray]] = [(META_ENTRY, encode_meta(vs.meta)), ("tags", vs.tags)]
    if vs.key is not None:
        entries.append(("key", vs.key))
    entries += [(f"in_{k}", vs.inputs[k]) for k in sorted(vs.inputs)]
    entries += [(f"out_{k}", vs.outputs[k]) for k in sorted(vs.outputs)]
    buf = io.BytesIO()
    write_npz(buf, entries)
    return buf.getvalue()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pack_id_of(sets: list[dict[str, Any]]) -> str:
    """The pack id: sha256 of the sorted 'name sha256' lines of every set (FPS-VEC-5)."""
    lines = "".join(f"{s['name']} {s['sha256']}\n" for s in sorted(sets, key=lambda s: s["name"]))
    return hashlib.sha256(lines.encode()).hexdigest()


def manifest_entry(vs: VectorSet, data: bytes) -> dict[str, Any]:
    m = vs.meta
    depends: set[str] = set()
    for o in m["outputs"].values():
        depends.update(o.get("depends_on", []))
    return {
        "name": vs.name, "file": f"{vs.name}.npz", "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data), "cases": vs.cases, "operation": m["operation"],
        "coverage_model": m["coverage_model"], "requirements": m["requirements"],
        "profile": m.get("profile"), "scheme": m.get("scheme"), "model": m.get("model"),
        "formats": sorted({o["format"] for o in m["outputs"].values()}
                          | {i["format"] for i in m["inputs"].values() if i.get("format")}),
        "outputs": sorted(m["outputs"]), "depends_on": sorted(depends), "seed": m["seed"],
    }


def write_manifest(out: Path, level: int, entries: list[dict[str, Any]], models: dict[str, str]) -> dict:
    manifest = {
        "schema_version": SCHEMA_VERSION, "spec_version": SPEC_VERSION,
        "generator_version": GENERATOR_VERSION, "level": level,
        "pack_id": pack_id_of(entries), "tags": {k: {"bit": b, "meaning": d} for k, (b, d) in TAG_DOC.items()},
        "coverage_models": models, "sets": sorted(entries, key=lambda e: e["name"]),
    }
    write_text(out / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def _safe_member(root: Path, rel: str) -> Path:
    """FPS-VEC-6: a manifest path must name a plain file directly inside the pack folder."""
    if not isinstance(rel, str) or not rel or "/" in rel or "\\" in rel or rel in (".", "..") \
            or rel.startswith(".") or ":" in rel:
        raise IntegrityError(f"{root / MANIFEST}: set path {rel!r} escapes the pack folder or is not a plain file name")
    p = root / rel
    if p.is_symlink() or p.resolve().parent != root.resolve():
        raise IntegrityError(f"{root / MANIFEST}: set path {rel!r} escapes the pack folder")
    return p


class Pack:
    """A vector pack on disk: the manifest and lazy access to its sets (FPS-VEC-5)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        mpath = self.root / MANIFEST
        if not self.root.is_dir():
            raise FpspecError(f"{self.root}: not a folder (a vector pack is a folder holding {MANIFEST})")
        try:
            self.manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FpspecError(f"{mpath}: no such file (not a vector pack)") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise IntegrityError(f"{mpath}: not valid JSON ({exc})") from None
        m = self.manifest
        for k in ("schema_version", "spec_version", "generator_version", "pack_id", "sets", "level"):
            if k not in m:
                raise IntegrityError(f"{mpath}: lacks {k!r}")
        if m["schema_version"] != SCHEMA_VERSION:
            raise IntegrityError(f"{mpath}: schema_version {m['schema_version']!r}, this reader knows {SCHEMA_VERSION}")
        if not isinstance(m["sets"], list):
            raise IntegrityError(f"{mpath}: 'sets' must be a list")
        self.entries: dict[str, dict[str, Any]] = {}
        for e in m["sets"]:
            name = e.get("name") if isinstance(e, dict) else None
            if not isinstance(name, str) or not SET_NAME.match(name):
                raise IntegrityError(f"{mpath}: bad set name {name!r}")
            _safe_member(self.root, e.get("file"))
            self.entries[name] = e
        if pack_id_of(list(self.entries.values())) != m["pack_id"]:
            raise IntegrityError(f"{mpath}: pack_id does not match the listed set hashes (manifest edited?)")

    @property
    def pack_id(self) -> str:
        return self.manifest["pack_id"]

    def names(self) -> list[str]:
        return sorted(self.entries)

    def load(self, name: str, verify_hash: bool = True) -> VectorSet:
        """Load one set: hash check, pickle-free load, schema check (exit-3 errors as IntegrityError)."""
        if name not in self.entries:
            raise FpspecError(f"{self.root}: no set named {name!r}")
        e = self.entries[name]
        path = _safe_member(self.root, e["file"])
        if not path.is_file():
            raise IntegrityError(f"{path}: listed in {MANIFEST} but missing")
        digest = sha256_file(path)
        if verify_hash and digest != e["sha256"]:
            raise IntegrityError(f"{path}: sha256 {digest[:16]}... differs from {MANIFEST} "
                                 f"({e['sha256'][:16]}...): corrupted or tampered")
        try:
            arrays = load_npz(path)
        except FpspecError as exc:
            raise IntegrityError(str(exc)) from None
        if META_ENTRY not in arrays:
            raise IntegrityError(f"{path}: no {META_ENTRY} entry")
        try:
            meta = decode_meta(arrays[META_ENTRY], str(path))
            validate_set_arrays(name, meta, arrays)
        except IntegrityError:
            raise
        except FpspecError as exc:
            raise IntegrityError(f"{path}: {exc}") from None
        if meta["cases"] != e.get("cases"):
            raise IntegrityError(f"{path}: {meta['cases']} cases, {MANIFEST} says {e.get('cases')}")
        vs = VectorSet(
            name=name, meta=meta,
            inputs={k: arrays[f"in_{k}"] for k in meta["inputs"]},
            outputs={k: arrays[f"out_{k}"] for k in meta["outputs"]},
            tags=arrays["tags"], key=arrays.get("key"), sha256=digest, path=path)
        return vs

    def __iter__(self) -> Iterator[VectorSet]:
        for n in self.names():
            yield self.load(n)

    def verify(self) -> list[str]:
        """Check every set (hash, schema, counts) and that no unlisted .npz lies in the folder.

        Returns one line per set; raises IntegrityError on the first problem (FPS-VEC-5).
        """
        lines = []
        listed = {e["file"] for e in self.entries.values()}
        stray = sorted(p.name for p in self.root.glob("*.npz") if p.name not in listed)
        if stray:
            raise IntegrityError(f"{self.root}: files not listed in {MANIFEST}: {stray}")
        for n in self.names():
            vs = self.load(n)
            if vs.meta["spec_version"] != self.manifest["spec_version"]:
                raise IntegrityError(f"{vs.path}: spec_version {vs.meta['spec_version']} differs from the manifest's")
            if vs.meta["tags"] != TAGS:
                raise IntegrityError(f"{vs.path}: tag table differs")
            lines.append(f"ok  {n}  {vs.cases} cases  sha256 {vs.sha256[:12]}")
        return lines
