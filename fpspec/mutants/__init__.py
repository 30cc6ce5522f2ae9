"""Mutation testing of the conformance pack: plausible wrong implementations, run against it (FPS-MUT-*).

:mod:`.catalogue` holds the mutants as data, :mod:`.variations` how each computes, :mod:`.binary32`
the kernel engineer's binary32 quantizer whose steps the operation-order mutants change, and
:mod:`.run` runs them on a pack (``fpspec vectors mutants PACK``).
"""

from .catalogue import CATALOGUE, Mutant, get_mutant, mutants_for_set
from .run import MutantOutcome, MutationReport, run_mutants

__all__ = ["CATALOGUE", "Mutant", "get_mutant", "mutants_for_set", "MutantOutcome", "MutationReport", "run_mutants"]
