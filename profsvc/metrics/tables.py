"""Where the data tables of `metrics/` live.

Installed, they are the package `profsvc._tables`; run from a source checkout
(PYTHONPATH pointing at the repository, as on a GPU host without a build
backend) they are the repository's metrics/ folder itself.
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator


def _tables() -> Traversable:
    try:
        return resources.files("profsvc._tables")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "metrics"


def load_table(name: str) -> dict[str, Any]:
    """Parse one TOML table shipped under metrics/ (for example "catalog.toml")."""
    return tomllib.loads(_tables().joinpath(name).read_text(encoding="utf-8"))


class TableError(ValueError):
    """A table is malformed; the message names the entry."""


_SNAKE_CASE = re.compile(r"^[a-z][a-z0-9_]*$")


def _snake_case(value: str) -> str:
    if not _SNAKE_CASE.match(value):
        raise ValueError(f"id {value!r} must be snake_case")
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


# The field types every table's entries share (the rule table, the static-check rules, ...).
SnakeCaseId = Annotated[str, AfterValidator(_snake_case)]
NonBlank = Annotated[str, AfterValidator(_not_blank)]
