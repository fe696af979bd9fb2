"""check_source: parse a candidate once, run every detector over it, turn the hits into findings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

from profsvc.staticcheck import (
    concurrency,
    cuda,
    fallback,
    kernels,
    mutation,
    patching,
    precision,
    runtime,
    state,
    structure,
    subclass,
)
from profsvc.staticcheck.cppsource import clear_caches
from profsvc.staticcheck.facts import ModuleFacts
from profsvc.staticcheck.findings import Finding, Hit
from profsvc.staticcheck.precision import reference_kinds
from profsvc.staticcheck.rules import RuleId, load_rules
from profsvc.staticcheck.syntax import parse_quietly

# A rule's first findings say what a reader needs; a source built to repeat one trick on every line would
# otherwise make a report of tens of megabytes (175,000 findings for a 1 MiB source).
MAX_PER_RULE = 20

_DETECTORS: tuple[Callable[[ModuleFacts], Iterator[Hit]], ...] = (
    structure.detect,
    kernels.detect,
    fallback.detect,
    state.detect,
    mutation.detect,
    concurrency.detect,
    patching.detect,
    runtime.detect,
    subclass.detect,
)


def check_source(
    candidate_text: str, candidate_name: str = "candidate.py", reference_text: str | None = None
) -> list[Finding]:
    """Statically check a candidate module for the known ways of gaming a kernel benchmark.

    The candidate defines ModelNew (and may hold the reference Model, get_inputs and
    get_init_inputs as well); reference_text, when given, is the reference module's
    source and decides which lower precisions are legitimate. Nothing is imported or
    run. Findings come sorted by position, at most one per rule and line and
    MAX_PER_RULE per rule (the last one kept counts the rest). A candidate that does
    not parse yields a single syntax_error finding.
    """
    rules = load_rules()
    try:
        tree = parse_quietly(candidate_text, candidate_name)
    except SyntaxError as error:
        detail = f"{candidate_name}:{error.lineno}: {error.msg}"
        return [rules.finding(Hit(RuleId.SYNTAX_ERROR, max(error.lineno or 1, 1), max(error.offset or 1, 1), detail))]
    except (ValueError, RecursionError) as error:
        # Null bytes raise ValueError, absurd nesting RecursionError: neither is a module Python would run.
        return [rules.finding(Hit(RuleId.SYNTAX_ERROR, 1, 1, f"{candidate_name}: {error}"))]
    facts = ModuleFacts(tree, candidate_text)
    reference = reference_text if reference_text is not None else facts.reference_source
    allowed = reference_kinds(reference)
    known = bool(reference.strip())
    try:
        hits: list[Hit] = [hit for detect in _DETECTORS for hit in detect(facts)]
        hits += precision.detect(facts, allowed, known)
        hits += cuda.detect(facts, allowed, known)
    finally:
        clear_caches()
    return [rules.finding(hit) for hit in _capped(_unique(hits))]


def _unique(hits: Iterable[Hit]) -> list[Hit]:
    """Sorted by position; the first hit of a rule on a line stands for the rest (nested nodes repeat it)."""
    seen: set[tuple[str, int]] = set()
    unique: list[Hit] = []
    for hit in sorted(hits, key=lambda h: (h.line, h.column)):
        if (hit.rule_id, hit.line) not in seen:
            seen.add((hit.rule_id, hit.line))
            unique.append(hit)
    return unique


def _capped(hits: list[Hit]) -> list[Hit]:
    """The first MAX_PER_RULE hits of each rule; the last one kept says how many more lines the rule fired on."""
    totals = Counter(hit.rule_id for hit in hits)
    kept: Counter[str] = Counter()
    capped: list[Hit] = []
    for hit in hits:
        kept[hit.rule_id] += 1
        if kept[hit.rule_id] < MAX_PER_RULE:
            capped.append(hit)
        elif kept[hit.rule_id] == MAX_PER_RULE:
            rest = totals[hit.rule_id] - MAX_PER_RULE
            capped.append(replace(hit, detail=f"{hit.detail} (and {rest} more lines not listed)") if rest else hit)
    return capped
