"""Where the data tables of `metrics/` live: installed as the package `profsvc._tables`."""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any


def load_table(name: str) -> dict[str, Any]:
    """Parse one TOML table shipped under metrics/ (for example "catalog.toml")."""
    text = resources.files("profsvc._tables").joinpath(name).read_text(encoding="utf-8")
    return tomllib.loads(text)
