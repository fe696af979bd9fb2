"""profsvc: a GPU kernel profiling service built on NVIDIA Nsight Compute."""

__version__ = "0.1.0"
