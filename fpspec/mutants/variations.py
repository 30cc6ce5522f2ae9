"""How a mutant computes a set's outputs: one small class per kind of variation (FPS-MUT-2).

Every variation takes a set's meta and inputs, as :func:`fpspec.vectors.ops.compute` does, and
returns the outputs a wrong implementation would submit.  Each is fpspec's own implementation
with one named thing changed:

* :class:`QuantizeChoice`   a named choice of :func:`fpspec.quantization.quantize` set otherwise
  (profile, zero-scale rule, scale format, T, block, tile, payload rounding, view, ...);
* :class:`Fp32Order`        a step of the binary32 sequence done in another order or rounding
  (:mod:`fpspec.mutants.binary32`);
* :class:`MxExponent`       an MX scale exponent off by a constant or taken with another emax;
* :class:`OutputLayout`     fpspec's correct outputs laid out wrongly (scale order, transposes);
* :class:`EncodeChoice`     a conversion's rounding mode, SR width or policy set otherwise;
* :class:`EncodeVia`        a conversion through an intermediate format, or with subnormals flushed;
* :class:`DecodeVariant`    a decoder with one code class misread;
* :class:`GemmChoice`       a GEMM model parameter set otherwise;
* :class:`GemmOperands`     the operands swapped, or the tensor-scale factor applied twice or never.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..convert import decode, encode
from ..formats import CodeKind, get_format
from ..quantization import prepare_view
from ..schemes import resolve_spec
from ..vectors.blocks import quantize_case, quantize_cases
from .binary32 import Fp32Steps, quantize_view_fp32_steps

__all__ = ["Variation", "QuantizeChoice", "Fp32Order", "MxExponent", "OutputLayout", "EncodeChoice",
           "EncodeVia", "DecodeVariant", "GemmChoice", "GemmOperands"]

Outputs = dict[str, np.ndarray]


class Variation:
    """A wrong implementation of one operation: ``outputs(meta, inputs)`` as fpspec's ``compute``."""

    def outputs(self, meta: dict[str, Any], inputs: dict[str, np.ndarray]) -> Outputs:  # pragma: no cover
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover
        raise NotImplementedError


# ------------------------------------------------------------------ quantize
@dataclass(frozen=True)
class QuantizeChoice(Variation):
    """fpspec's quantizer with some of the set's named choices changed."""

    changes: dict[str, Any]

    def outputs(self, meta: dict[str, Any], inputs: dict[str, np.ndarray]) -> Outputs:
        return quantize_cases(meta, inputs, lambda x, g, r, p: quantize_case(x, g, r, {**p, **self.changes}))

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.changes.items())


def _spec_of(p: dict[str, Any]):
    return resolve_spec(p["scheme"], p["profile"], block=p["block"], tile=p["tile"], target=p.get("target"),
                        scale_format=p["scale_format"], zero_scale_rule=p["zero_scale_rule"],
                        rounding=p["rounding"], payload_format=p.get("payload_format"))


@dataclass(frozen=True)
class Fp32Order(Variation):
    """The binary32 step quantizer with the steps given (FPS-MUT-2)."""

    steps: Fp32Steps
    view: Callable[[np.ndarray, Any, dict[str, Any]], np.ndarray] | None = field(default=None, compare=False)

    def outputs(self, meta: dict[str, Any], inputs: dict[str, np.ndarray]) -> Outputs:
        def case(x: np.ndarray, g: float, r: np.ndarray | None, p: dict[str, Any]) -> Outputs:
            spec = _spec_of(p)
            if self.view is not None:
                v = self.view(x, spec, p)
            else:
                v = prepare_view(x, spec, columnwise=p["columnwise"], rht=p["rht"]).view
            gg = np.float32(g) if g != 0 else np.float32(np.max(np.abs(v)))
            return quantize_view_fp32_steps(v, spec, gg, r, self.steps)
        return quantize_cases(meta, inputs, case)

    def describe(self) -> str:
        default = Fp32Steps()
        return ", ".join(f"{k}={getattr(self.steps, k)}" for k in self.steps.__dataclass_fields__
                         if getattr(self.steps, k) != getattr(default, k)) or "the profile's steps"


@dataclass(frozen=True)
class MxExponent(Variation):
    """An OCP MX floor scale whose exponent is ``floor(log2 a_B) - emax + offset``, emax that of
    ``emax_of`` (FPS-BLK-12); payload x / 2^e rounded as the set says, saturating."""

    offset: int = 0
    emax_of: str | None = None

    def outputs(self, meta: dict[str, Any], inputs: dict[str, np.ndarray]) -> Outputs:
        def case(x: np.ndarray, g: float, r: np.ndarray | None, p: dict[str, Any]) -> Outputs:
            pf = get_format(p.get("payload_format") or "e2m1")
            emax = get_format(self.emax_of).emax if self.emax_of else pf.emax
            b = p["block"]
            v = x.astype(np.float64)
            a = np.abs(v).reshape(v.shape[0], -1, b).max(axis=2)
            fl = np.frexp(np.where(a > 0, a, 1.0))[1] - 1  # floor(log2 a), exact (np.log2 may round up)
            e = np.clip(np.where(a > 0, fl - emax + self.offset, -127), -127, 127).astype(np.int64)
            scale = np.ldexp(1.0, np.repeat(e, b, axis=1))
            codes = encode(v / scale, pf, p["rounding"], overflow="sat")
            q = decode(codes, pf)
            with np.errstate(over="ignore"):
                deq = (q * scale).astype(np.float32)
            return {"codes": codes.astype(np.uint8), "scales": (e + 127).astype(np.uint8),
                    "decode_scale": np.array(1.0, np.float32).view(np.uint32),
                    "dequant": deq.view(np.uint32)}
        return quantize_cases(meta, inputs, case)

    def describe(self) -> str:
        return f"scale exponent floor(log2 a_B) - emax{self.offset:+d}" + (f" (emax of {self.emax_of})"
                                                                           if self.emax_of else "")


@dataclass(frozen=True)
class OutputLayout(Variation):
    """fpspec's correct outputs with a layout mistake: ``fix(name, array, params) -> array``."""

    what: str
    fix: Callable[[str, np.ndarray, dict[str, Any]], np.ndarray] = field(compare=False)

    def outputs(self, meta: dict[str, Any], inputs: dict[str, np.ndarray]) -> Outputs:
        def case(x: np.ndarray, g: float, r: np.ndarray | None, p: dict[str, Any]) -> Outputs:
            return {k: self.fix(k, v, p) for k, v in quantize_case(x, g, r, p).items()}
        return quantize_cases(meta, inputs, case)

    def describe(self) -> str:
        return self.what


# ------------------------------------------------------------------ encode / decode
@dataclass(frozen=True)
class EncodeChoice(Variation):
    """fpspec's conversion with the rounding mode, SR width or a policy changed."""

    rounding: str | None = None
    nbits: int | None = None
    policies: dict[str, str] = field(default_factory=dict)
    overflow_flipped: bool = False

    def outputs(self, meta: dict[str, Any], inputs: dict[str, np.ndarray]) -> Outputs:
        from ..vectors.ops import compute
        m = copy.deepcopy(meta)
        for o in m["outputs"].values():
            if self.rounding is not None:
                o["rounding"] = self.rounding
            if self.nbits is not None and o.get("sr_bits"):
                o["sr_bits"] = self.nbits
            o["policies"].update(self.policies)
            if self.overflow_flipped:
                o["policies"]["overflow"] = "nonfinite" if o["policies"]["overflow"] == "sat" else "sat"
        return compute(m, inputs, "fast")

    def describe(self) -> str:
        parts = ([f"rounding={self.rounding}"] if self.rounding else []) + \
            ([f"nbits={self.nbits}"] if self.nbits else []) + [f"{k}={v}" for k, v in self.policies.items()] + \
            (["overflow policy flipped (saturate <-> Inf/NaN)"] if self.overflow_flipped else [])
        return ", ".join(parts)


@dataclass(frozen=True)
class EncodeVia(Variation):
    """A conversion that first rounds the input to ``via`` (RNE), or flushes subnormal inputs
    (``daz``) or subnormal results (``ftz``) to zero."""

    via: str | None = None
    daz: bool = False
    ftz: bool = False

    def outputs(self, meta: dict[str, Any], inputs: dict[str, np.ndarray]) -> Outputs:
        from ..vectors.ops import compute, float_view
        in_fmt = meta["inputs"]["x"]["format"]
        with np.errstate(invalid="ignore"):  # NaN inputs widen to float64 with a harmless warning
            x = float_view(inputs["x"], in_fmt).astype(np.float64)
        if self.daz:
            x = np.where(np.abs(x) < float(get_format(in_fmt).min_normal), np.copysign(0.0, x), x)
        if self.via:
            with np.errstate(invalid="ignore", over="ignore"):
                x = decode(encode(x, self.via, "rne", overflow="nonfinite", nan="nan"), self.via)
        # the changed values are values of the input format: fpspec's own conversion of them (NaNs as given)
        bits = encode(np.where(np.isnan(x), 0.0, x), in_fmt, "rne", overflow="nonfinite")
        out = compute(meta, {**inputs, "x": np.where(np.isnan(x), inputs["x"], bits)}, "fast")
        if self.ftz:
            for name, o in meta["outputs"].items():
                f = get_format(o["format"])
                sign = np.asarray(f.sign_mask if f.signed else 0, out[name].dtype)
                out[name] = np.where(subnormal_codes(out[name], f), out[name] & sign, out[name])
        return out

    def describe(self) -> str:
        return (f"rounded to {self.via} first" if self.via else "") + ("subnormal inputs read as 0" if self.daz
                                                                         else "") + \
            ("subnormal results flushed to 0" if self.ftz else "")


@dataclass(frozen=True)
class DecodeVariant(Variation):
    """A decoder that misreads one class of codes: ``misread(codes, fmt) -> fp32 bits`` replaces
    the value of the codes where ``where(codes, fmt)`` is true."""

    what: str
    where: Callable[[np.ndarray, Any], np.ndarray] = field(compare=False)
    value: Callable[[np.ndarray, Any], np.ndarray] = field(compare=False)

    def outputs(self, meta: dict[str, Any], inputs: dict[str, np.ndarray]) -> Outputs:
        from ..vectors.ops import compute
        good = compute(meta, inputs, "fast")["value"]
        f = get_format(meta["inputs"]["code"]["format"])
        codes = inputs["code"]
        return {"value": np.where(self.where(codes, f), self.value(codes, f), good).astype(np.uint32)}

    def describe(self) -> str:
        return self.what


def subnormal_codes(codes: np.ndarray, f: Any) -> np.ndarray:
    """Where ``codes`` (of format ``f``, at most 16 bits) are subnormal (:class:`fpspec.formats.CodeKind`)."""
    table = np.array([f.kind(c) is CodeKind.SUBNORMAL for c in range(f.num_codes)])
    return table[codes.astype(np.int64)]


# ------------------------------------------------------------------ GEMM
def _gemm_with(meta: dict[str, Any], inputs: dict[str, np.ndarray], model: Any) -> Outputs:
    from ..vectors.gemm_sets import gemm_op
    m = copy.deepcopy(meta)
    m["params"]["model"] = model
    return gemm_op(m, inputs, "fast")


@dataclass(frozen=True)
class GemmChoice(Variation):
    """The set's GEMM model with some parameters changed (:meth:`fpspec.models.GemmModel.replace`)."""

    changes: dict[str, Any]

    def outputs(self, meta: dict[str, Any], inputs: dict[str, np.ndarray]) -> Outputs:
        from ..named_models import get_model
        return _gemm_with(meta, inputs, get_model(meta["params"]["model"]).replace(**self.changes))

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.changes.items())


@dataclass(frozen=True)
class GemmOperands(Variation):
    """The GEMM with its operands handled otherwise: ``swap`` exchanges A and B (B^T A^T,
    transposed back); ``reverse_k`` runs K backwards (codes and block scales reversed along K);
    ``alpha_never`` drops the tensor-scale factor alpha."""

    swap: bool = False
    reverse_k: bool = False
    alpha_never: bool = False

    def outputs(self, meta: dict[str, Any], inputs: dict[str, np.ndarray]) -> Outputs:
        from ..named_models import get_model
        model = get_model(meta["params"]["model"])
        ins = dict(inputs)
        if self.alpha_never:  # tensor scales read as 1: amax = 6T, encode and decode scales 1
            six_t = np.float32(6 * float(meta["operand"]["target"]))
            for x in ("a", "bt"):
                n = inputs[f"{x}_amax"].shape
                ins[f"{x}_amax"] = np.full(n, six_t, np.float32).view(np.uint32)
                for k in ("encode_scale", "decode_scale"):
                    ins[f"{x}_{k}"] = np.full(n, np.float32(1), np.float32).view(np.uint32)
        if self.reverse_k:
            for k, v in inputs.items():
                if v.ndim == 3 and (k in ("a", "bt") or k.endswith("_codes") or k.endswith("_scales")):
                    ins[k] = np.ascontiguousarray(v[:, :, ::-1])
        if self.swap:
            for k in inputs:
                if k == "a" or k.startswith("a_"):
                    ins["bt" + k[1:]], ins[k] = ins[k], ins["bt" + k[1:]]
        c = _gemm_with(meta, ins, model)["c"]
        return {"c": np.ascontiguousarray(np.swapaxes(c, 1, 2)) if self.swap else c}

    def describe(self) -> str:
        return "; ".join(w for w, on in (("A and B exchanged (B^T A^T, transposed back)", self.swap),
                                         ("K accumulated backwards", self.reverse_k),
                                         ("the tensor-scale factor alpha never applied", self.alpha_never)) if on)
