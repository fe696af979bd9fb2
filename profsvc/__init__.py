"""profsvc: a GPU kernel profiling service built on NVIDIA Nsight Compute (the server package)."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
