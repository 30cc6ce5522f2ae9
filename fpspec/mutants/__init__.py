"""Mutation testing of the conformance pack: plausible wrong implementations, run against it (FPS-MUT-*).

:mod:`.catalogue` holds the mutants as data, :mod:`.variations` how each computes, :mod:`.binary32`
the kernel engineer's binary32 quantizer whose steps the operation-order mutants change, and
:mod:`.run` runs them on a pack (``fpspec vectors mutants PACK``).  Importing this package also
registers the catalogue with the checker's explanation of a failing set
(:func:`fpspec.vectors.explain.register_candidates`): a submission that equals a mutant is told
which one ("your outputs match mutant nvfp4/te-fp32:divide-first-scale").
"""

from typing import Any, Iterator

from ..vectors.explain import register_candidates
from .catalogue import CATALOGUE, Mutant, get_mutant, mutants_for_set
from .run import MutantOutcome, MutationReport, run_mutants

__all__ = ["CATALOGUE", "Mutant", "get_mutant", "mutants_for_set", "MutantOutcome", "MutationReport", "run_mutants",
           "mutant_candidates"]


def mutant_candidates(meta: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The catalogue's mutants of one set, as the checker's named candidates (FPS-MUT-1)."""
    for m in mutants_for_set(str(meta.get("name", ""))):
        yield f"mutant {m.name} ({m.description})", (lambda inputs, m=m: m.variation.outputs(meta, dict(inputs)))


register_candidates(mutant_candidates)
