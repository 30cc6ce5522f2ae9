"""From findings to a parameter vector, and the nearest named preset (FPS-PRB-14).

The probed parameters are mapped onto :class:`~fpspec.models.GemmModel` fields,
including the kept fraction bits of a fused block result (``accumulate_bits``,
FPS-GEMM-13) and a library's split of K into slices (``split_k``, FPS-GEMM-14):
the fitted parameter vector is a GemmModel.  What the family cannot express (an
interleaved group, a directed rounding other than RZ, an irregular split of K) is
reported under ``outside_family``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..models import GemmModel
from ..presets import PRESETS

__all__ = ["FittedModel", "fit", "nearest_preset", "PROBED_FIELDS"]

#: The GemmModel fields the probe observes with plain operand codes.  The others
#: (scale placement, operand domain, alpha) belong to quantized operands.
PROBED_FIELDS = ("group_size", "window_bits", "below_window", "product_exponent", "fused",
                 "group_rounding", "accumulate_rounding", "accumulate_bits", "promotion_interval",
                 "promotion_rounding", "snap_bits", "split_k")


@dataclass
class FittedModel:
    """The fitted parameter vector (a GemmModel) plus what the family lacks."""

    model: GemmModel
    outside_family: list[str] = field(default_factory=list)
    unobserved: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"parameters": self.model.to_dict(), "outside_family": self.outside_family,
                "unobserved": self.unobserved}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FittedModel":
        """Also reads reports written before GemmModel had ``accumulate_bits`` and
        ``split_k`` (they carried ``accumulate_bits`` and ``split_slice`` beside the
        parameters)."""
        params = dict(d["parameters"])
        if "accumulate_bits" in d and "accumulate_bits" not in params:
            params["accumulate_bits"] = d["accumulate_bits"]
        if d.get("split_slice") is not None and params.get("split_k") is None:
            params["split_k"] = d["split_slice"]
        legacy = ("group result keeps", "K split into slices")
        outside = [o for o in d.get("outside_family", []) if not o.startswith(legacy)]
        return cls(GemmModel.from_dict(params), outside, list(d.get("unobserved", [])))


def _mode(name: str | None) -> str | None:
    return {"rz": "rz", "rne": "rne"}.get(name or "")


def fit(findings: dict[str, dict], operand_format: str) -> FittedModel:
    """Map recipe findings onto a GemmModel (FPS-PRB-14)."""
    g = findings["groups"]
    w = findings["window"]
    acc = findings["accumulator"]
    cross = findings["cross_group"]
    bnd = findings["boundaries"]
    lat = findings["lattice"]
    outside: list[str] = []
    unobserved: list[str] = []
    kind = g.get("kind")
    params: dict[str, Any] = {"operand_domain": "encoded", "alpha_source": "none",
                              "snap_bits": lat.get("snap_bits")}
    if g.get("layout") == "interleaved":
        outside.append(f"interleaved group membership {g.get('members_of_group_0')}")
    acc_bits = acc.get("accumulate_bits") or 23
    if acc_bits > 23:
        acc_bits = 23
    if kind == "fused-truncating" and w.get("window_bits") is None:
        outside.append("a truncating group was seen but no window: the reduction is an FP32 order that "
                       f"is no GemmModel (group 0 = {g.get('members_of_group_0')}); fitted as a sequential chain")
        kind = "none-visible"
    if g.get("layout") == "interleaved" and kind != "fused-truncating":
        kind = "none-visible"
    if kind == "fused-truncating":
        params.update(fused=True, group_rounding="none", group_size=g["group_size"],
                      window_bits=w.get("window_bits"),
                      below_window=w.get("below_window") if w.get("below_window") in ("truncate", "floor")
                      else "truncate",
                      product_exponent=w.get("product_exponent", "operands")
                      if w.get("product_exponent") in ("operands", "exact") else "operands")
        if w.get("below_window") not in ("truncate", "floor"):
            outside.append(f"below-window treatment {w.get('below_window')}")
        rmode = _mode(acc.get("rounding"))
        if rmode is None:
            if acc.get("rounding", "").startswith("unobservable"):
                unobserved.append("accumulate_rounding")
                rmode = "rz"
            else:
                outside.append(f"group-result rounding {acc.get('rounding')}")
                rmode = "rz"
        params["accumulate_rounding"] = rmode
        if cross.get("rounding") not in ("window-truncated", rmode):
            outside.append(f"cross-group rounding {cross.get('rounding')} differs from the block's {rmode}")
    elif kind == "exact-sum":
        params.update(fused=False, group_size=g["group_size"], window_bits=None, below_window="exact",
                      group_rounding=_mode(acc.get("rounding")) or "rne",
                      accumulate_rounding=_mode(cross.get("rounding")) or "rz")
        if _mode(acc.get("rounding")) is None:
            outside.append(f"group rounding {acc.get('rounding')}")
        if _mode(cross.get("rounding")) is None:
            outside.append(f"cross-group rounding {cross.get('rounding')}")
    elif kind == "exact-accumulation":
        params.update(fused=False, group_size=None, window_bits=None, below_window="exact",
                      group_rounding="none", accumulate_rounding=_mode(acc.get("rounding")) or "rne",
                      operand_domain="decoded-exact")
    else:
        # no group effect: a sequential chain, rounded as the group-result rows say
        mode = _mode(acc.get("rounding")) or "rne"
        params.update(fused=False, group_size=1, window_bits=None, below_window="exact",
                      group_rounding="rne", accumulate_rounding=mode, operand_domain="decoded-fp32")
        unobserved.append("group_size (no group boundary visible)")
    if bnd.get("boundaries"):
        p = bnd.get("promotion_interval")
        if p is None:
            outside.append(f"chain boundaries at {bnd['boundaries'][:8]} are not periodic")
        elif params.get("group_size") and p % params["group_size"] == 0:
            params["promotion_interval"] = p
            params["promotion_rounding"] = _mode(bnd.get("rounding")) or "rne"
            if _mode(bnd.get("rounding")) is None:
                outside.append(f"promotion rounding {bnd.get('rounding')}")
    if params.get("fused"):
        params["accumulate_bits"] = acc_bits
    elif acc_bits != 23:
        outside.append(f"a non-fused group result keeps {acc_bits} fraction bits")
    sl = findings.get("slices", {})
    if sl.get("slice") is not None:
        split = sl["slice"]
        if params.get("group_size") and split % params["group_size"] == 0:
            params["split_k"] = split
        else:
            outside.append(f"K split into slices of {split}, not whole groups")
    try:
        model = GemmModel(**params)
    except Exception as exc:  # a combination the family cannot hold: say so, fit the plainest chain
        outside.append(f"no GemmModel holds these findings ({exc}); fitted as a sequential FP32 chain")
        model = GemmModel(group_size=1, fused=False, group_rounding="rne", accumulate_rounding="rne",
                          operand_domain="decoded-fp32", alpha_source="none")
    return FittedModel(model=model, outside_family=outside, unobserved=unobserved)


def library_split(fitted: GemmModel, preset: GemmModel) -> GemmModel:
    """The fitted model with its reduction over K expressed as ``split_k`` where the
    preset has no promotion: a promotion every P products with RNE and nothing inside
    is exactly a split of K into slices of P added with FP32 RNE (FPS-GEMM-14), which
    is how a library's split-K shows in a probe."""
    if (preset.promotion_interval is None and fitted.promotion_interval is not None
            and fitted.promotion_rounding == "rne" and fitted.split_k is None):
        return fitted.replace(promotion_interval=None, promotion_rounding=preset.promotion_rounding,
                              split_k=fitted.promotion_interval)
    return fitted


def nearest_preset(fitted: FittedModel) -> dict[str, Any]:
    """The preset that differs from the fit in the fewest probed fields, and how.

    ``split_k`` is the library's split of K that the preset needs on top (None: none),
    not counted as a difference; ``exact`` says the preset with that split_k is the fit
    on every probed field."""
    best = None
    for name, preset in PRESETS.items():
        m = library_split(fitted.model, preset.model)
        diffs = {f: {"fitted": getattr(m, f), "preset": getattr(preset.model, f)}
                 for f in PROBED_FIELDS if f != "split_k" and getattr(m, f) != getattr(preset.model, f)}
        # fewest differences; among equals, one that needs no library split
        if best is None or (len(diffs), m.split_k is not None) < (len(best[1]), best[2] is not None):
            best = (name, diffs, m.split_k)
    assert best is not None
    return {"name": best[0], "differences": best[1], "exact": not best[1], "split_k": best[2]}
