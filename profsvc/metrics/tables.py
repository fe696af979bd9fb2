"""Where the data tables of `metrics/` live.

Installed, they are the package `profsvc._tables`; run from a source checkout
(PYTHONPATH pointing at the repository, as on a GPU host without a build
backend) they are the repository's metrics/ folder itself.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any


def _tables() -> Traversable:
    try:
        return resources.files("profsvc._tables")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "metrics"


def load_table(name: str) -> dict[str, Any]:
    """Parse one TOML table shipped under metrics/ (for example "catalog.toml")."""
    return tomllib.loads(_tables().joinpath(name).read_text(encoding="utf-8"))
