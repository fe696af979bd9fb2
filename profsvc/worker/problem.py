"""Load a KernelBench-style problem: reference Model, inputs and candidate ModelNew.

The problem comes as one module holding all four names, or as a candidate
module (ModelNew) plus a reference module (Model, get_inputs, get_init_inputs).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REFERENCE_NAMES = ("Model", "get_inputs", "get_init_inputs")
CANDIDATE_NAMES = ("ModelNew",)


class ProblemError(Exception):
    """The problem module lacks a required name."""


@dataclass
class Problem:
    """The four callables a problem provides."""

    model: type
    model_new: type
    get_inputs: Callable[[], list[Any]]
    get_init_inputs: Callable[[], list[Any]]


def import_file(path: Path, module_name: str) -> ModuleType:
    """Import a Python file as a module (its folder goes on sys.path for sibling imports)."""
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(f"cannot import {path.name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _require(module: ModuleType, names: tuple[str, ...], file_name: str) -> None:
    missing = [n for n in names if not hasattr(module, n)]
    if missing:
        raise ProblemError(f"{file_name} defines no {', '.join(missing)}")


def load_candidate(main: Path) -> type:
    """Import the candidate's module and return its ModelNew."""
    module = import_file(main, main.stem)
    _require(module, CANDIDATE_NAMES, main.name)
    return module.ModelNew


def load_reference(reference: Path) -> Problem:
    """Import the reference's module (Model, get_inputs, get_init_inputs) for the judge; no ModelNew needed."""
    module = import_file(reference, reference.stem)
    _require(module, REFERENCE_NAMES, reference.name)
    return Problem(
        model=module.Model,
        model_new=type(None),
        get_inputs=module.get_inputs,
        get_init_inputs=module.get_init_inputs,
    )


def load_problem(main: Path, reference: Path | None = None, *, candidate_needed: bool = True) -> Problem:
    """Import the problem (and separate reference) and check the required names (ModelNew only where needed:
    a published problem has none; its model_new is then the reference's Model)."""
    candidate = import_file(main, main.stem)
    reference_module = import_file(reference, reference.stem) if reference else candidate
    _require(reference_module, REFERENCE_NAMES, (reference or main).name)
    if candidate_needed:
        _require(candidate, CANDIDATE_NAMES, main.name)
    return Problem(
        model=reference_module.Model,
        model_new=getattr(candidate, "ModelNew", reference_module.Model),
        get_inputs=reference_module.get_inputs,
        get_init_inputs=reference_module.get_init_inputs,
    )
