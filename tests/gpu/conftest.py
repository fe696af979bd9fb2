"""GPU suite: runs only where an NVIDIA GPU and ncu are present (`pytest -m gpu`)."""

from __future__ import annotations

import shutil

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if shutil.which("nvidia-smi") and shutil.which("ncu"):
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with ncu (run this suite on a GPU host)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
