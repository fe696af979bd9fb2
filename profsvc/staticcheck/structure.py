"""missing_model_new: the candidate has no ModelNew the harness could instantiate and call."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from profsvc.staticcheck.facts import MODEL_NEW, ModuleFacts
from profsvc.staticcheck.findings import Hit, hit_at
from profsvc.staticcheck.rules import RuleId


def detect(facts: ModuleFacts) -> Iterator[Hit]:
    """A missing ModelNew, or a ModelNew with no forward at all (not even an inherited one)."""
    if not facts.model_new_classes:
        if not _bound_elsewhere(facts):
            yield hit_at(RuleId.MISSING_MODEL_NEW, facts.tree, "no class ModelNew is defined")
        return
    if "forward" in facts.methods or "__call__" in facts.methods:
        return
    for cls in facts.model_new_classes:
        binds_forward = any(
            isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "forward" for t in s.targets)
            for s in cls.body
        )
        # A torch.nn layer base brings its own forward; torch_fallback reports that one.
        layer_base = any((facts.imports.resolve(b) or "").startswith("torch.nn.") for b in cls.bases) and not all(
            facts.imports.resolve(b) == "torch.nn.Module" for b in cls.bases
        )
        if not binds_forward and not layer_base:
            yield hit_at(RuleId.MISSING_MODEL_NEW, cls, "ModelNew defines no forward")


def _bound_elsewhere(facts: ModuleFacts) -> bool:
    """ModelNew bound by an assignment or an import rather than a class statement."""
    if MODEL_NEW in facts.module_globals or MODEL_NEW in facts.imports.aliases:
        return True
    return any(isinstance(s, ast.FunctionDef) and s.name == MODEL_NEW for s in facts.tree.body)
