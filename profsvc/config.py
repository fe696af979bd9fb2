"""Server configuration: one typed, validated object built from CLI flags."""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


def default_state_dir() -> Path:
    """Where the build cache, job workspaces and artifacts live by default."""
    if os.environ.get("PROFSVC_STATE_DIR"):
        return Path(os.environ["PROFSVC_STATE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "profsvc"


class Limits(BaseModel):
    """Bounds on what one request may ask for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_source_bytes: int = Field(default=1024 * 1024, gt=0, description="largest source file accepted")
    max_report_bytes: int = Field(default=200 * 1024 * 1024, gt=0, description="largest uploaded .ncu-rep")
    max_nvcc_flags: int = Field(default=32, ge=0)
    max_launches: int = Field(default=64, gt=0, description="most launches one Profile may profile")
    max_trials: int = Field(default=50, gt=0, description="most correctness trials one request may ask for")
    max_timed_calls: int = Field(default=2000, gt=0, description="most timed calls per model one request may ask for")
    queue_size: int = Field(default=64, gt=0, description="jobs waiting or running before RESOURCE_EXHAUSTED")
    job_timeout_s: float = Field(default=900.0, gt=0, description="wall-clock limit of one job's process")
    compile_timeout_s: float = Field(default=600.0, gt=0, description="wall-clock limit of one build or import")
    job_memory_bytes: int = Field(default=32 << 30, gt=0, description="memory of one jailed process tree (cgroup)")
    job_tasks: int = Field(default=1024, gt=0, description="processes and threads of one jailed process tree")


class Security(BaseModel):
    """Who may call the server, and over what."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token: SecretStr | None = Field(default=None, description="bearer token every call must carry")
    token_file: Path | None = Field(default=None, description="where the token was read (hidden from jobs)")
    tls_cert: Path | None = Field(default=None, description="PEM certificate chain to serve TLS with")
    tls_key: Path | None = Field(default=None, description="PEM private key of tls_cert")
    insecure: bool = Field(default=False, description="allow a non-loopback address without a token")

    @model_validator(mode="after")
    def _cert_and_key(self) -> Security:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both a certificate and its key")
        return self


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class ServerConfig(BaseModel):
    """Everything `profsvc serve` (or the embedded service) runs with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=50051, ge=0, le=65535)
    security: Security = Field(default_factory=Security)
    state_dir: Path = Field(default_factory=default_state_dir)
    python: str = Field(default=sys.executable, description="interpreter of the worker processes")
    ncu_path: str | None = None
    nvcc_path: str | None = None
    cuda_arch: str | None = Field(default=None, description="nvcc -arch for .cu programs; default from the GPU")
    compile_workers: int = Field(default_factory=lambda: max(1, os.cpu_count() or 1), gt=0)
    keep_jobs: int = Field(default=200, gt=0, description="finished job workspaces (and artifacts) kept")
    max_sessions: int = Field(default=256, gt=0, description="sessions whose last result is kept for deltas")
    session_bytes: int = Field(default=256 << 20, gt=0, description="memory budget of those kept results")
    session_ttl_s: float = Field(default=3600.0, gt=0, description="a session's result expires after this")
    warm_workers: bool = Field(
        default=True, description="keep one worker of each kind started ahead of jobs (torch, CUDA context, ncu)"
    )
    ncu_warmup: bool = Field(
        default=True,
        description="on a one-GPU host, warm ncu workers profile a kernel of their own before their job",
    )
    metrics_port: int | None = Field(default=None, ge=0, le=65535, description="Prometheus /metrics port")
    shutdown_grace_s: float = Field(
        default=30.0, ge=0, description="on SIGTERM or SIGINT, requests in flight get this long to finish"
    )
    limits: Limits = Field(default_factory=Limits)
    jail: Literal["required", "auto", "off"] = Field(
        default="required",
        description="jail every job process (required: refuse to start without a working jail; auto: jail where "
        "the host allows, else run unjailed and say so in every result; off: never, loopback only)",
    )

    @model_validator(mode="after")
    def _check_exposure(self) -> ServerConfig:
        # Untrusted code runs on this host: listening beyond loopback without a token needs --insecure.
        if not is_loopback(self.host) and self.security.token is None and not self.security.insecure:
            raise ValueError(
                f"refusing to listen on {self.host} without a token: pass --token-file, or --insecure to accept "
                "anyone who can reach this address"
            )
        if not is_loopback(self.host) and self.jail != "required":
            raise ValueError(f"refusing to run jobs unjailed on {self.host}: only a loopback server may")
        return self

    @property
    def cache_dir(self) -> Path:
        """Content-addressed build cache (shared by all jobs, kept across restarts)."""
        return self.state_dir / "cache"

    @property
    def jobs_dir(self) -> Path:
        """Per-job workspaces."""
        return self.state_dir / "jobs"
