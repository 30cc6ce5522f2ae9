"""Why a set fails: what the submitted outputs equal, and the failing block's intermediates (FPS-CHK-4).

Two helpers of the checker, called only for failing sets:

* :func:`explain_mismatch` recomputes a failing set with fpspec's own implementation under each
  *candidate*, a named choice other than the set's (another profile of the scheme, the
  zero-scale rule flipped, the other scale format, another payload rounding, the other T; for
  encode sets another rounding mode or policy), and says which one the submitted outputs equal
  bit for bit: ``your outputs match nvfp4/te-kernel``.
* :func:`quantize_trace` gives, for a quantize mismatch, the values of the failing block as
  :func:`fpspec.exact.blocks.block_trace_exact` computes them (the exact spec's own steps): the
  tensor amax, the block amax, the unrounded scale, its code, and for the first failing element
  the scaled value before payload rounding with the expected and submitted code and value.

Candidates come from the providers in :data:`CANDIDATE_PROVIDERS`, each a callable
``meta -> iterable of (name, outputs_fn)`` with ``outputs_fn(inputs) -> {output: array}``.
This is the extension point of a catalogue of plausible wrong implementations: it registers
its own provider with :func:`register_candidates` (this module imports no catalogue).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np

from ..choices import NanPolicy, NegativePolicy, OverflowPolicy, RoundingMode, ZeroPolicy
from ..convert import encode
from ..errors import FpspecError
from ..exact.blocks import block_trace_exact
from ..schemes import BlockSpec, get_profile, get_scheme, profiles_of, resolve_spec
from .fields import field_text
from .ops import compute, float_view

__all__ = ["CANDIDATE_PROVIDERS", "register_candidates", "explain_mismatch",
           "quantize_candidates", "encode_candidates", "quantize_trace", "TARGETS"]

#: outputs_fn(inputs) -> {output name: array of bit patterns}, the set's outputs as a candidate computes them
OutputsFn = Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]
#: provider(meta) -> (name, outputs_fn) for every candidate it has for the set (none: an empty iterable)
CandidateProvider = Callable[[dict[str, Any]], Iterable[tuple[str, OutputsFn]]]

#: The two targets T of the block sets: a set made with one is explained by the other.
TARGETS = (448.0, 2048.0)
_POLICIES = {"overflow": OverflowPolicy, "nan": NanPolicy, "negative": NegativePolicy, "zero": ZeroPolicy}


# ------------------------------------------------------------ candidates
def _quantize_fn(meta: dict[str, Any], changes: dict[str, Any]) -> OutputsFn:
    """fpspec's quantizer on the set's inputs with some of its params changed."""
    changed = dict(meta, params=dict(meta["params"], **changes))
    return lambda inputs: compute(changed, dict(inputs), "fast")


def _accepted(params: dict[str, Any]) -> bool:
    """Whether fpspec takes these block settings (the profile accepts the scale format, rounding, ...)."""
    try:
        _spec(params)
    except FpspecError:
        return False
    return True


def _spec(p: dict[str, Any]) -> BlockSpec:
    return resolve_spec(p["scheme"], p["profile"], block=p["block"], tile=p["tile"], target=p["target"],
                        scale_format=p["scale_format"], zero_scale_rule=p["zero_scale_rule"],
                        rounding=p["rounding"], payload_format=p.get("payload_format"))


def _quantize_changes(meta: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, params changed) of every named choice other than the set's (FPS-BLK-2..28)."""
    p = meta["params"]
    here = f"{p['scheme']}/{p['profile']}"
    for other in profiles_of(p["scheme"]):
        if other != p["profile"]:
            yield f"{p['scheme']}/{other}", {"profile": other}
    if get_scheme(p["scheme"]).tensor_scale:
        yield (f"{here} with the zero-scale rule {'off' if p['zero_scale_rule'] else 'on'}",
               {"zero_scale_rule": not p["zero_scale_rule"]})
        for t in TARGETS:
            if p["target"] is not None and float(p["target"]) != t:
                yield f"{here} with T = {t:g} (not {float(p['target']):g})", {"target": t}
    prof = get_profile(p["scheme"], p["profile"])
    for sf in prof.scale_formats:
        if sf != p["scale_format"]:
            yield f"{here} with scale format {sf}", {"scale_format": sf}
    stochastic_set = RoundingMode.parse(p["rounding"]).stochastic
    for r in prof.roundings:
        if r != p["rounding"] and (stochastic_set or not RoundingMode.parse(r).stochastic):
            yield f"{here} with payload rounding {r}", {"rounding": r}


def quantize_candidates(meta: dict[str, Any]) -> Iterator[tuple[str, OutputsFn]]:
    """The built-in candidates of a quantize set: every other profile of the scheme that accepts the
    set's settings, the zero-scale rule flipped, the other scale format, the other payload
    roundings the profile accepts (stochastic ones only where the set has random bits), the
    other T."""
    if meta.get("operation") != "quantize":
        return
    for name, changes in _quantize_changes(meta):
        params = dict(meta["params"], **changes)
        if _accepted(params):
            yield name, _quantize_fn(meta, changes)


def _encode_fn(meta: dict[str, Any], oname: str, rounding: str, policies: dict[str, str]) -> OutputsFn:
    """fpspec's encoder for one output of an encode set, with another rounding or policies."""
    o = meta["outputs"][oname]

    def run(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = float_view(inputs["x"], meta["inputs"]["x"]["format"])
        kw: dict[str, Any] = dict(policies, impl="fast")
        if RoundingMode.parse(rounding).stochastic:
            kw.update(rbits=inputs[o["random_input"]], nbits=o["sr_bits"])
        with np.errstate(invalid="ignore"):  # NaN inputs widen to float64 with a harmless warning
            return {oname: encode(x, o["format"], rounding, **kw)}
    return run


def encode_candidates(meta: dict[str, Any]) -> Iterator[tuple[str, OutputsFn]]:
    """The built-in candidates of an encode set, per output: every other rounding mode (stochastic
    ones only for outputs with random bits) under the output's policies, and every other value
    of one policy under the output's rounding (FPS-RND-*)."""
    if meta.get("operation") != "encode":
        return
    for oname, o in sorted(meta["outputs"].items()):
        pol = dict(o["policies"])
        for mode in RoundingMode:
            if mode.value != o["rounding"] and (o.get("random_input") or not mode.stochastic):
                yield f"encode to {o['format']} with rounding {mode.value}", _encode_fn(meta, oname, mode.value, pol)
        for kind, choices in _POLICIES.items():
            for choice in choices:
                if choice.value != pol[kind]:
                    yield (f"encode to {o['format']} {o['rounding']} with {kind}={choice.value}",
                           _encode_fn(meta, oname, o["rounding"], dict(pol, **{kind: choice.value})))


#: The candidate providers :func:`explain_mismatch` asks, in order: fpspec's named choices first.
#: A catalogue of plausible wrong implementations (mutants) adds its own with
#: :func:`register_candidates`; a provider yields nothing for sets it has no candidate for.
CANDIDATE_PROVIDERS: list[CandidateProvider] = [quantize_candidates, encode_candidates]


def register_candidates(provider: CandidateProvider) -> None:
    """Add a provider of named candidates (``meta -> iterable of (name, outputs_fn)``), once."""
    if provider not in CANDIDATE_PROVIDERS:
        CANDIDATE_PROVIDERS.append(provider)


# ------------------------------------------------------------ explaining
def _same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))


def _outputs(submitted: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Submitted outputs by output name (an ``out_`` prefix dropped, the ``__pack__`` stamp left out)."""
    return {(k[4:] if k.startswith("out_") else k): np.asarray(v) for k, v in submitted.items()
            if not k.startswith("__")}


def explain_mismatch(meta: dict[str, Any], inputs: dict[str, np.ndarray], submitted: dict[str, np.ndarray],
                     expected: Mapping[str, np.ndarray] | None = None) -> str | None:
    """The named choice the submitted outputs of a failing set equal bit for bit, as a sentence
    (``your outputs match nvfp4/te-kernel``), or None when no candidate equals them (FPS-CHK-4).

    A candidate matches when every submitted output it computes equals the submitted one and
    at least one of them is a failing output (one that differs from ``expected``, the pack's
    outputs; fpspec's own when not given).  A candidate that computes every submitted output
    explains the whole set; one that computes some (an encode candidate computes one output)
    explains those outputs: ``your rne output matches encode to e2m1 with rounding rna``.
    The providers are asked in order, fpspec's named choices first: a mutant of the catalogue is
    named only when no named choice equals the outputs.
    """
    got = _outputs(submitted)
    if not got:
        return None
    if expected is None:
        expected = compute(meta, inputs, "fast")
    failing = {k for k, v in got.items() if k in expected and not _same(v, expected[k])}
    if not failing:
        return None
    for provider in CANDIDATE_PROVIDERS:  # in order: a later provider is asked only when no earlier one matched
        sentence = _matching_candidates(provider(meta), inputs, got, failing)
        if sentence:
            return sentence
    return None


def _matching_candidates(candidates: Iterable[tuple[str, OutputsFn]], inputs: dict[str, np.ndarray],
                         got: dict[str, np.ndarray], failing: set[str]) -> str | None:
    """The sentence for the candidates of one provider that equal the submitted outputs, or None."""
    whole: list[str] = []
    per_output: dict[str, list[str]] = {}
    for name, outputs_fn in candidates:
        try:
            outs = outputs_fn(inputs)
        except FpspecError:  # the candidate refuses these inputs (a policy 'error', a zero amax)
            continue
        compared = {k for k in outs if k in got}
        if not compared & failing or not all(_same(outs[k], got[k]) for k in compared):
            continue
        if compared == set(got):
            whole.append(name)
        for k in compared & failing:
            per_output.setdefault(k, []).append(name)
    if whole:
        also = f" (as do {', '.join(whole[1:])})" if len(whole) > 1 else ""
        return f"your outputs match {whole[0]}{also}"
    parts = [f"your {k} output matches {per_output[k][0]}" for k in sorted(per_output)]
    return "; ".join(parts) or None


# ------------------------------------------------------------ the failing block
def _value_text(v: float | Fraction) -> str:
    """An intermediate value: a Fraction (exact arithmetic) exactly, a float (binary32 arithmetic)
    as its binary32 value with the bits."""
    if isinstance(v, Fraction):
        return str(v) if v.denominator == 1 else f"{float(v):.9g} (exactly {v})"
    f = np.float32(v)
    return f"{str(f)} (binary32 0x{int(np.array(f).view(np.uint32)):08x})"


def _case_view(meta: dict[str, Any], inputs: Mapping[str, np.ndarray], case: int,
               spec: BlockSpec) -> tuple[np.ndarray, float, np.ndarray | None]:
    """The quantized view of one case, its tensor amax g and random bits, as the set's quantizer gets them."""
    from ..quantization import prepare_view, tensor_amax

    p = meta["params"]
    x = np.asarray(inputs["x"][case]).view(np.float32)
    pv = prepare_view(x, spec, columnwise=p["columnwise"], rht=p["rht"], impl="fast")
    given = float(np.asarray(inputs["amax"][case]).view(np.float32)) if "amax" in inputs else 0.0
    if given == 0 or not get_scheme(p["scheme"]).tensor_scale:  # measured, as the set's quantizer does
        g = float(pv.amax if pv.amax is not None else tensor_amax(pv.view))
    else:
        g = float(np.float32(given))
    rbits = np.asarray(inputs["r"][case]) if "r" in inputs else None
    return pv.view, g, rbits


def _block_of(output: str, element: tuple[int, ...], spec: BlockSpec) -> tuple[int, int]:
    """The scale-grid block an output element belongs to (a ``scales`` element is one)."""
    if output == "scales":
        return int(element[0]), int(element[1])
    i, j = int(element[0]), int(element[1])
    return (i // spec.block if spec.tile == "BxB" else i), j // spec.block


def _first_failing(trace_elements: Iterable[Any], output: str, element: tuple[int, ...],
                   expected: Mapping[str, np.ndarray], submitted: Mapping[str, np.ndarray], case: int) -> Any:
    """The failing element itself (codes, dequant), or the first element of a failing block whose
    code or dequantized value differs (scales), or the block's first element."""
    elements = list(trace_elements)
    if output in ("codes", "dequant"):
        return next(e for e in elements if e.index == (int(element[0]), int(element[1])))
    for e in elements:
        for k in ("codes", "dequant"):
            if k in submitted and k in expected and submitted[k][case][e.index] != expected[k][case][e.index]:
                return e
    return elements[0]


def quantize_trace(meta: dict[str, Any], inputs: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
                   submitted: Mapping[str, np.ndarray], output: str, case: int,
                   element: tuple[int, ...] | None) -> list[str]:
    """Lines that show the failing block of a quantize mismatch (FPS-CHK-4): the tensor amax g,
    the block amax a_B, the unrounded scale (exact for exact profiles, binary32 for binary32
    ones; the exponent for MX), its code expected and submitted, and for the first failing
    element x, the scaled value before payload rounding, the expected and submitted code and
    value.  Computed by :func:`fpspec.exact.blocks.block_trace_exact`; [] for outputs without
    a block (``decode_scale``)."""
    if element is None:
        return []
    # (an output of another shape than the pack's has no element to show; the checker reports its shape)
    got = {k: v for k, v in _outputs(submitted).items() if k in expected and v.shape == np.shape(expected[k])}
    spec = _spec(meta["params"])
    view, g, rbits = _case_view(meta, inputs, case, spec)
    bt = block_trace_exact(view, spec, g, _block_of(output, element, spec), rbits)
    sf, pf = spec.scale_format.name, spec.payload_format.name
    scale = (f"exponent e = {bt.exponent}" if bt.scale_unrounded is None
             else f"unrounded scale {_value_text(bt.scale_unrounded)}")
    want_scale = int(expected["scales"][case][bt.block]) if "scales" in expected else bt.scale_code
    got_scale = f", submitted {field_text(int(got['scales'][case][bt.block]), sf)}" if "scales" in got else ""
    lines = [f"block {list(bt.block)} of case {case}: tensor amax g = {_value_text(g)}, "
             f"block amax a_B = {_value_text(bt.block_amax)}",
             f"    {scale} -> scale code {field_text(want_scale, sf)}{got_scale}"]
    e = _first_failing(bt.elements, output, element, expected, got, case)
    lines.append(f"element {list(e.index)}: x = {_value_text(e.x)}, scaled before payload rounding "
                 f"{_value_text(e.scaled)}")
    want_code = int(expected["codes"][case][e.index]) if "codes" in expected else e.code
    code_got = f", submitted {field_text(int(got['codes'][case][e.index]), pf)}" if "codes" in got else ""
    lines.append(f"    expected code {field_text(want_code, pf)}{code_got}")
    if "dequant" in expected:
        deq_got = (f", submitted {field_text(int(got['dequant'][case][e.index]), 'fp32')}"
                   if "dequant" in got else "")
        lines.append(f"    expected dequant {field_text(int(expected['dequant'][case][e.index]), 'fp32')}{deq_got}")
    return lines
