"""The probe's result as data and JSON (FPS-PRB-14, FPS-PRB-15)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ProbeReport", "REPORT_SCHEMA"]

REPORT_SCHEMA = "fpspec-probe-report/1"


@dataclass
class ProbeReport:
    """Everything one probe run found: target facts, findings per recipe, the fitted
    parameter vector, the nearest preset, the GEMM calls made, and the acceptance test."""

    target: dict[str, Any]
    operand_format: str
    K: int
    findings: dict[str, dict]
    fitted: dict[str, Any]
    nearest_preset: dict[str, Any]
    calls: list[dict]
    acceptance: dict[str, Any] | None = None
    raw: dict[str, list[str]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool | None:
        return None if self.acceptance is None else bool(self.acceptance.get("passed"))

    def to_dict(self, raw: bool = False) -> dict[str, Any]:
        d = {"schema": REPORT_SCHEMA, "target": self.target, "operand_format": self.operand_format,
             "K": self.K, "findings": self.findings, "fitted": self.fitted,
             "nearest_preset": self.nearest_preset,
             "gemm_calls": {"count": len(self.calls), "calls": self.calls},
             "acceptance": self.acceptance, **self.extra}
        if raw:
            d["raw_outputs_hex"] = self.raw
        return d

    def to_json(self, raw: bool = False) -> str:
        return json.dumps(self.to_dict(raw), indent=2, default=_default)

    def summary(self) -> str:
        """A few human lines (the CLI prints these without --json)."""
        fm = self.fitted["parameters"]
        lines = [f"target: {self.target.get('target', '?')}  operands: {self.operand_format}  K: {self.K}",
                 f"groups: {self.findings['groups'].get('kind')}, G = {fm['group_size']}"
                 f" ({self.findings['groups'].get('layout')})",
                 f"window: F = {fm['window_bits']} ({fm['below_window']}), product exponent "
                 f"{fm['product_exponent']}",
                 f"group result: {self.fitted['accumulate_bits']} fraction bits; group rounding "
                 f"{fm['group_rounding']}, accumulator rounding {fm['accumulate_rounding']}",
                 f"promotion: every {fm['promotion_interval']} products ({fm['promotion_rounding']})"
                 if fm["promotion_interval"] else "promotion: none seen",
                 f"output lattice: {'2^-%d' % fm['snap_bits'] if fm['snap_bits'] is not None else 'none'}"]
        det = self.findings.get("determinism")
        if det:
            lines.append(f"deterministic: {det['deterministic']} over {det['repeats']} repeats")
        if self.fitted.get("outside_family"):
            lines.append("outside the GemmModel family: " + "; ".join(self.fitted["outside_family"]))
        np_ = self.nearest_preset
        lines.append(f"nearest preset: {np_['name']}" + (" (exact on every probed field)" if np_["exact"]
                     else f" (differs in {', '.join(np_['differences'])})"))
        lines.append(f"GEMM calls: {len(self.calls)}")
        if self.acceptance is not None:
            a = self.acceptance
            lines.append(f"acceptance: {a['matched']}/{a['compared']} outputs bit-equal "
                         f"({100 * a['match_rate']:.4f} %) -> {'PASS' if a['passed'] else 'FAIL'}")
        return "\n".join(lines)


def _default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    return str(o)
