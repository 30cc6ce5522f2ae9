"""Capability declarations: what an implementation claims to support (FPS-CHK-5).

A declaration is a small YAML or JSON mapping; every key is optional and an
absent key means "anything"::

    name: torch-cpu-float8            # free text, echoed in reports
    operations: [decode, encode]      # decode, encode, quantize, gemm
    formats: [e4m3, e5m2, ue8m0, fp16, bf16, fp32]
    rounding: [rne, rna, sr-midpoint/8]   # a stochastic mode with /N names its bit width;
                                      # or per target format: {e4m3: [rne], ue8m0: [rna]}
    schemes: [ue5m3]
    profiles: [ue5m3/exact]           # scheme/profile, as in the set meta
    models: [blackwell-nvfp4-seed]    # GEMM presets
    policies:                         # non-default named policies, per format
      e4m3: {overflow: sat}
      ue8m0: {zero: min}
    nan_payloads: [e4m3]              # formats whose NaN codes all count as equal
    sets: ["encode-*"]                # optional extra glob filter on set names

Every name is checked when the declaration is read: an unknown key, operation,
format, rounding mode, scheme, profile, model or policy is a usage error (exit
2), never a silent "not-supported" for everything.  Rounding aliases (``sr``)
are stored under their canonical names.

An output of a set is *supported* when its operation, every format it reads or
writes, its rounding, scheme, profile and model are declared, and its named
policies equal the declared ones (or fpspec's vector defaults where the
declaration names none).  Unsupported outputs are reported as such, never as
failures; supported outputs that the results lack make the run incomplete.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..choices import NanPolicy, NegativePolicy, OverflowPolicy, RoundingMode, ZeroPolicy
from ..errors import FpspecError
from ..fast.rounding import MAX_SR_BITS
from ..formats import FORMATS
from ..cublas.library import LIBRARY_PRESETS
from ..presets import PRESETS
from ..schemes import PROFILES, SCHEMES
from .coverage import vector_policies
from .ops import policies_dict

__all__ = ["Declaration", "load_declaration", "OPERATIONS"]

_KEYS = {"name", "operations", "formats", "rounding", "schemes", "profiles", "models", "policies",
         "nan_payloads", "sets", "notes"}

#: The operations a vector set can have (the ``operation`` of its meta).
OPERATIONS = ("decode", "encode", "quantize", "gemm")
_POLICIES = {"overflow": OverflowPolicy, "nan": NanPolicy, "negative": NegativePolicy, "zero": ZeroPolicy}


def _known(where: str, key: str, values: tuple[str, ...] | None, known: object) -> None:
    """Refuse a declared name that fpspec does not know (the check would never match it)."""
    for v in values or ():
        if v not in known:  # type: ignore[operator]
            raise FpspecError(f"{where}: {key}: unknown name {v!r}; known: {', '.join(map(str, known))}")  # type: ignore[call-overload]


def _rounding_name(where: str, text: str) -> str:
    """A declared rounding, canonical: 'rne', 'sr-midpoint/8' (aliases such as 'sr' resolved)."""
    mode_text, slash, bits = text.partition("/")
    try:
        mode = RoundingMode.parse(mode_text)
    except ValueError as exc:
        raise FpspecError(f"{where}: rounding: {exc}") from None
    if not slash:
        return mode.value
    if not mode.stochastic:
        raise FpspecError(f"{where}: rounding: {text!r}: only a stochastic mode names a bit width")
    if not bits.isdigit() or not 1 <= int(bits) <= MAX_SR_BITS:
        raise FpspecError(f"{where}: rounding: {text!r}: the width must be 1..{MAX_SR_BITS}")
    return f"{mode.value}/{int(bits)}"


@dataclass(frozen=True)
class Declaration:
    name: str = "undeclared"
    operations: tuple[str, ...] | None = None
    formats: tuple[str, ...] | None = None
    rounding: tuple[str, ...] | dict[str, tuple[str, ...]] | None = None
    schemes: tuple[str, ...] | None = None
    profiles: tuple[str, ...] | None = None
    models: tuple[str, ...] | None = None
    policies: dict[str, dict[str, str]] = field(default_factory=dict)
    nan_payloads: tuple[str, ...] = ()
    sets: tuple[str, ...] | None = None
    #: True when built from a file; False means "everything in the pack is expected".
    declared: bool = False

    @classmethod
    def from_mapping(cls, d: dict[str, Any], where: str = "declaration") -> "Declaration":
        if not isinstance(d, dict):
            raise FpspecError(f"{where}: a declaration must be a mapping")
        unknown = set(d) - _KEYS
        if unknown:
            raise FpspecError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(_KEYS)}")

        def tup(k: str) -> tuple[str, ...] | None:
            v = d.get(k)
            if v is None:
                return None
            if isinstance(v, str):
                v = [v]
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise FpspecError(f"{where}: {k} must be a list of strings")
            return tuple(v)

        rounding: tuple[str, ...] | dict[str, tuple[str, ...]] | None
        if isinstance(d.get("rounding"), dict):
            rounding = {}
            for k, v in d["rounding"].items():
                v = [v] if isinstance(v, str) else v
                if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                    raise FpspecError(f"{where}: rounding.{k} must be a list of strings")
                _known(where, "rounding (format)", (str(k),), FORMATS)
                rounding[str(k)] = tuple(_rounding_name(where, x) for x in v)
        else:
            rounding = tup("rounding")
            if rounding is not None:
                rounding = tuple(_rounding_name(where, x) for x in rounding)
        pol = d.get("policies") or {}
        if not isinstance(pol, dict) or not all(isinstance(v, dict) for v in pol.values()):
            raise FpspecError(f"{where}: policies must map a format to {{policy: value}}")
        policies: dict[str, dict[str, str]] = {}
        for fmt, choices in pol.items():
            _known(where, "policies (format)", (str(fmt),), FORMATS)
            for kind, value in choices.items():
                _known(where, f"policies.{fmt}", (str(kind),), _POLICIES)
                _known(where, f"policies.{fmt}.{kind}", (str(value),), [e.value for e in _POLICIES[kind]])
            policies[str(fmt)] = {str(a): str(b) for a, b in choices.items()}
        name = d.get("name", "unnamed")
        if not isinstance(name, str):
            raise FpspecError(f"{where}: name must be a string")
        decl = cls(name=name, operations=tup("operations"), formats=tup("formats"),
                   rounding=rounding, schemes=tup("schemes"), profiles=tup("profiles"),
                   models=tup("models"), policies=policies,
                   nan_payloads=tup("nan_payloads") or (), sets=tup("sets"), declared=True)
        _known(where, "operations", decl.operations, OPERATIONS)
        _known(where, "formats", decl.formats, FORMATS)
        _known(where, "schemes", decl.schemes, SCHEMES)
        _known(where, "profiles", decl.profiles, [f"{s}/{p}" for s, p in PROFILES])
        _known(where, "models", decl.models, [*PRESETS, *LIBRARY_PRESETS])  # library presets name gemm-shapes sets
        _known(where, "nan_payloads", decl.nan_payloads, ["*", *FORMATS])
        return decl

    def to_dict(self) -> dict[str, Any]:
        def conv(v: Any) -> Any:
            if isinstance(v, tuple):
                return list(v)
            if isinstance(v, dict):
                return {k: conv(x) for k, x in v.items()}
            return v
        return {k: conv(v) for k, v in self.__dict__.items()}

    # ----------------------------------------------------------- matching
    def supports(self, meta: dict[str, Any], out_name: str) -> tuple[bool, str]:
        """Whether this declaration covers one output of a set, and if not, why."""
        if self.sets is not None and not any(fnmatch.fnmatchcase(meta["name"], g) for g in self.sets):
            return False, "set not selected by the declaration's sets"
        if self.operations is not None and meta["operation"] not in self.operations:
            return False, f"operation {meta['operation']} not declared"
        o = meta["outputs"][out_name]
        fmts = {o["format"]} | {i["format"] for i in meta["inputs"].values() if i.get("format") not in (None, "raw")}
        if o.get("source_format"):
            fmts.add(o["source_format"])
        fmts.update(meta.get("formats_used", []))
        if self.formats is not None:
            missing = sorted(fmts - set(self.formats))
            if missing:
                return False, f"format(s) {', '.join(missing)} not declared"
        rnd = o.get("rounding")
        rfmt = o.get("rounding_format", o["format"])  # quantize outputs: the payload's rounding
        allowed_r = self.rounding.get(rfmt) if isinstance(self.rounding, dict) else self.rounding
        if rnd and self.rounding is not None:
            if allowed_r is None:
                return False, f"no rounding declared for {rfmt}"
            names = {f"{rnd}/{o['sr_bits']}", rnd} if o.get("sr_bits") else {rnd}
            if not names & set(allowed_r):
                return False, f"rounding {sorted(names)[-1] if o.get('sr_bits') else rnd} not declared"
        for key, attr in (("scheme", "schemes"), ("profile", "profiles"), ("model", "models")):
            val = o.get(key, meta.get(key))
            allowed = getattr(self, attr)
            if val is not None and allowed is not None and val not in allowed:
                return False, f"{key} {val} not declared"
        pol = o.get("policies")
        if pol:
            fmt = o["format"]
            want = policies_dict(vector_policies(fmt)) | self.policies.get(fmt, {})
            diff = [f"{k}={v}" for k, v in pol.items() if want.get(k) != v]
            if diff:
                return False, f"{fmt} policies {', '.join(diff)} differ from the declared ones"
        return True, ""

    def nan_any(self, fmt: str | None) -> bool:
        return fmt is not None and ("*" in self.nan_payloads or fmt in self.nan_payloads)


def load_declaration(path: str | Path | None) -> Declaration:
    """Read a YAML or JSON declaration (safe loaders only: no code runs)."""
    if path is None:
        return Declaration()
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FpspecError(f"{p}: no such declaration file") from None
    except OSError as exc:
        raise FpspecError(f"{p}: cannot read declaration ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise FpspecError(f"{p}: cannot read declaration (not UTF-8 text: {exc.reason} at byte {exc.start})") from None
    try:
        data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        lang = "JSON" if p.suffix == ".json" else "YAML"
        raise FpspecError(f"{p}: not valid {lang} ({' '.join(str(exc).split())})") from None
    return Declaration.from_mapping(data or {}, str(p))
