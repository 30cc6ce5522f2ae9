"""Running the mutant catalogue on a pack (FPS-MUT-3).

Each mutant computes the outputs of every set its globs name, and the checker
(:func:`fpspec.vectors.checker.check`, default declaration: every output bit-equal) checks them.  A mutant is *killed* when some
output of some set differs (or when it refuses a set's inputs, as a kernel that fails on valid
input fails the check), *equivalent* when it survives and carries a written argument that it
is the same function, and *survived* otherwise; *no set* when the pack has none of its sets.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ..errors import FpspecError
from ..vectors.checker import EXIT_PASS, check, select_names
from ..vectors.pack import Pack, VectorSet
from .catalogue import CATALOGUE, Mutant

__all__ = ["MutantOutcome", "MutationReport", "run_mutants", "first_difference"]


@dataclass
class MutantOutcome:
    """What one mutant did on the pack."""

    mutant: Mutant
    status: str                       # killed | survived | equivalent | no-set
    sets: list[str] = field(default_factory=list)
    killed_by: str = ""               # "set/output case i" of the first difference, or the refusal
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"mutant": self.mutant.name, "family": self.mutant.family, "status": self.status,
                "description": self.mutant.description, "sets": self.sets, "killed_by": self.killed_by,
                "equivalent": self.mutant.equivalent, "seconds": round(self.seconds, 3)}


@dataclass
class MutationReport:
    pack: str
    outcomes: list[MutantOutcome]

    def counts(self) -> dict[str, int]:
        out = {"killed": 0, "equivalent": 0, "survived": 0, "no-set": 0}
        for o in self.outcomes:
            out[o.status] += 1
        return out

    @property
    def kill_rate(self) -> float:
        """Killed over mutants that are not equivalent (1.0 for none)."""
        c = self.counts()
        live = c["killed"] + c["survived"] + c["no-set"]
        return c["killed"] / live if live else 1.0

    @property
    def exit_code(self) -> int:
        """0: every mutant killed or argued equivalent; 1: some survived (or had no set)."""
        c = self.counts()
        return 0 if c["survived"] == 0 and c["no-set"] == 0 else 1

    def to_dict(self) -> dict[str, Any]:
        return {"pack": self.pack, "mutants": len(self.outcomes), "counts": self.counts(),
                "kill_rate": round(self.kill_rate, 6), "outcomes": [o.to_dict() for o in self.outcomes]}


def first_difference(pack: Pack, name: str, outputs: dict[str, np.ndarray]) -> str:
    """'' when the checker passes ``outputs`` as set ``name`` of ``pack`` (every output bit-equal,
    default declaration), else where they first part, as the checker says it."""
    report = check(pack, {name: {f"out_{k}": v for k, v in outputs.items()}}, select=name, max_report=1,
                   explain=False)
    if report.exit_code == EXIT_PASS:
        return ""
    if report.mismatches:
        m = report.mismatches[0]
        return f"{m.set}/{m.output} case {m.case}"
    return "; ".join(report.errors + report.incomplete + [f"{o.set}/{o.output}: {o.status}" for o in report.outputs
                                                          if o.status != "pass"])


def run_mutants(pack: Pack | str | Path, mutants: Iterable[Mutant] | None = None,
                progress: Callable[[MutantOutcome, int, int], None] | None = None) -> MutationReport:
    """Run each mutant (default: the whole catalogue) on its sets of ``pack``."""
    pack = pack if isinstance(pack, Pack) else Pack(pack)
    todo = list(CATALOGUE if mutants is None else mutants)
    names = pack.names()
    cache: dict[str, VectorSet] = {}
    outcomes = []
    for i, m in enumerate(todo):
        t0 = time.perf_counter()
        sets = select_names(names, m.sets)
        outcome = MutantOutcome(m, "no-set", sets)
        for name in sets:
            vs = cache.get(name) or cache.setdefault(name, pack.load(name))
            try:
                outs = m.variation.outputs(vs.meta, vs.inputs)
            except FpspecError as exc:
                outcome.status, outcome.killed_by = "killed", f"{name}: refused ({exc})"
                break
            where = first_difference(pack, name, outs)
            if where:
                outcome.status, outcome.killed_by = "killed", where
                break
            outcome.status = "survived"
        if outcome.status == "survived" and m.equivalent:
            outcome.status = "equivalent"
        outcome.seconds = time.perf_counter() - t0
        outcomes.append(outcome)
        if progress is not None:
            progress(outcome, i + 1, len(todo))
    return MutationReport(str(pack.root), outcomes)
