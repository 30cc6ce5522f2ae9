"""From findings to a parameter vector, and the nearest named preset (FPS-PRB-14).

The probed parameters are mapped onto :class:`~fpspec.models.GemmModel` fields.
What the family cannot express (a group result kept to fewer than 23 fraction
bits, an interleaved group, a directed rounding other than RZ, an irregular
split of K) is reported under ``outside_family`` and, where the vectorised
evaluator can, carried as ``accumulate_bits`` for the acceptance test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..models import PRESETS, GemmModel

__all__ = ["FittedModel", "fit", "nearest_preset", "PROBED_FIELDS"]

#: The GemmModel fields the probe observes with plain operand codes.  The others
#: (scale placement, operand domain, alpha) belong to quantized operands.
PROBED_FIELDS = ("group_size", "window_bits", "below_window", "product_exponent", "fused",
                 "group_rounding", "accumulate_rounding", "promotion_interval",
                 "promotion_rounding", "snap_bits")


@dataclass
class FittedModel:
    """The fitted parameter vector: a GemmModel plus what the family lacks."""

    model: GemmModel
    accumulate_bits: int = 23
    split_slice: int | None = None
    split_rounding: str = "rne"
    outside_family: list[str] = field(default_factory=list)
    unobserved: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"parameters": self.model.to_dict(), "accumulate_bits": self.accumulate_bits,
                "split_slice": self.split_slice, "split_rounding": self.split_rounding,
                "outside_family": self.outside_family, "unobserved": self.unobserved}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FittedModel":
        return cls(GemmModel.from_dict(d["parameters"]), d.get("accumulate_bits", 23), d.get("split_slice"),
                   d.get("split_rounding", "rne"), list(d.get("outside_family", [])),
                   list(d.get("unobserved", [])))


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
    if acc_bits != 23:
        outside.append(f"group result keeps {acc_bits} fraction bits (GemmModel rounds it to FP32)")
    split = None
    sl = findings.get("slices", {})
    if sl.get("slice") is not None:
        split = sl["slice"]
        outside.append(f"K split into slices of {split} (each its own chain), slice results added in "
                       f"order with FP32 RNE")
    try:
        model = GemmModel(**params)
    except Exception as exc:  # a combination the family cannot hold: say so, fit the plainest chain
        outside.append(f"no GemmModel holds these findings ({exc}); fitted as a sequential FP32 chain")
        model = GemmModel(group_size=1, fused=False, group_rounding="rne", accumulate_rounding="rne",
                          operand_domain="decoded-fp32", alpha_source="none")
    return FittedModel(model=model, accumulate_bits=acc_bits, split_slice=split, outside_family=outside,
                       unobserved=unobserved)


def nearest_preset(fitted: FittedModel) -> dict[str, Any]:
    """The preset that differs from the fit in the fewest probed fields, and how."""
    best = None
    for name, preset in PRESETS.items():
        diffs = {f: {"fitted": getattr(fitted.model, f), "preset": getattr(preset.model, f)}
                 for f in PROBED_FIELDS if getattr(fitted.model, f) != getattr(preset.model, f)}
        if fitted.accumulate_bits != 23:
            diffs["accumulate_bits"] = {"fitted": fitted.accumulate_bits, "preset": 23}
        if fitted.split_slice is not None:
            diffs["split_slice"] = {"fitted": fitted.split_slice, "preset": None}
        if best is None or len(diffs) < len(best[1]):
            best = (name, diffs)
    assert best is not None
    return {"name": best[0], "differences": best[1], "exact": not best[1]}
