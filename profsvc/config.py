"""Server configuration: one typed, validated object built from CLI flags."""

from __future__ import annotations

import ipaddress
import os
import re
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from profsvc_contract.errors import InvalidRequest
from profsvc_contract.tokens import checked_token

_IDENTITY = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


def default_state_dir() -> Path:
    """Where the build cache, job workspaces and artifacts live by default."""
    if os.environ.get("PROFSVC_STATE_DIR"):
        return Path(os.environ["PROFSVC_STATE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "profsvc"


def host_memory_bytes() -> int:
    """The host's physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


class Limits(BaseModel):
    """Bounds on what one request may ask for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_source_bytes: int = Field(default=1024 * 1024, gt=0, description="largest source file accepted")
    max_report_bytes: int = Field(default=200 * 1024 * 1024, gt=0, description="largest uploaded .ncu-rep")
    max_nvcc_flags: int = Field(default=32, ge=0)
    max_program_args: int = Field(default=256, ge=0, description="most arguments a program may be run with")
    max_nvtx_includes: int = Field(default=32, ge=0, description="most NVTX ranges one kernel filter may name")
    max_launches: int = Field(default=64, gt=0, description="most launches one Profile may profile")
    max_trials: int = Field(default=50, gt=0, description="most correctness trials one request may ask for")
    max_timed_calls: int = Field(default=2000, gt=0, description="most timed calls per model one request may ask for")
    queue_size: int = Field(default=64, gt=0, description="jobs waiting or running before RESOURCE_EXHAUSTED")
    job_timeout_s: float = Field(default=900.0, gt=0, description="wall-clock limit of one job's process")
    compile_timeout_s: float = Field(default=600.0, gt=0, description="wall-clock limit of one build or import")
    job_memory_bytes: int = Field(
        default_factory=lambda: min(32 << 30, host_memory_bytes() * 3 // 4),
        gt=0,
        description="memory of one jailed process tree (cgroup; default 32 GiB, at most 3/4 of the host's)",
    )
    job_tasks: int = Field(default=1024, gt=0, description="processes and threads of one jailed process tree")


class Security(BaseModel):
    """Who may call the server, and over what."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="bearer tokens by the name of the identity each stands for; with none, calls need no token",
    )
    token_file: Path | None = Field(default=None, description="where the tokens were read (hidden from jobs)")
    tls_cert: Path | None = Field(default=None, description="PEM certificate chain to serve TLS with")
    tls_key: Path | None = Field(default=None, description="PEM private key of tls_cert")
    insecure: bool = Field(default=False, description="allow a non-loopback address without a token")

    @model_validator(mode="after")
    def _cert_and_key(self) -> Security:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both a certificate and its key")
        return self

    @model_validator(mode="after")
    def _distinct_tokens(self) -> Security:
        for name in self.tokens:
            if not _IDENTITY.match(name):
                raise ValueError(f"identity name {name!r} is not allowed (1 to 64 of letters, digits, _ . @ -)")
        secrets = [token.get_secret_value() for token in self.tokens.values()]
        if len(set(secrets)) != len(secrets):
            raise ValueError("two identities have the same token")
        return self


def read_tokens(path: Path) -> dict[str, SecretStr]:
    """The server's token file: one token a line, optionally `name:token`; each line is an identity of its own.

    Blank lines and lines starting with # are skipped. A line without a name is named `token-<line number>`.
    """
    try:
        text = path.expanduser().read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest(f"the token file {path} is not UTF-8 text") from None
    tokens: dict[str, SecretStr] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, token = line.partition(":")
        if not sep:
            name, token = f"token-{number}", line
        if not _IDENTITY.match(name):
            raise InvalidRequest(
                f"the token file {path}, line {number}: the name {name[:64]!r} is not allowed"
                " (1 to 64 of letters, digits, _ . @ -)"
            )
        if name in tokens:
            raise InvalidRequest(f"the token file {path}, line {number}: the name {name!r} is there twice")
        if any(token == other.get_secret_value() for other in tokens.values()):
            raise InvalidRequest(f"the token file {path}, line {number}: the same token is on an earlier line")
        tokens[name] = SecretStr(checked_token(token, f"{path}, line {number},"))
    if not tokens:
        raise InvalidRequest(f"the token file {path} holds no token (one a line, optionally name:token)")
    return tokens


class Transport(BaseModel):
    """gRPC's limits on connections and messages: what one client may hold of the server."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_concurrent_streams: int = Field(default=64, gt=0, description="calls in flight on one connection")
    keepalive_s: float = Field(default=60.0, gt=0, description="ping a connection quiet this long")
    keepalive_timeout_s: float = Field(default=20.0, gt=0, description="close it when the ping gets no answer")
    max_connection_idle_s: float = Field(default=900.0, gt=0, description="close a connection without calls")
    max_connection_age_s: float = Field(default=3600.0, gt=0, description="ask a client to reconnect after this")
    max_connection_age_grace_s: float = Field(
        default=3600.0, ge=0, description="calls in flight on a connection past its age get this long to finish"
    )
    handshake_timeout_s: float = Field(default=20.0, gt=0, description="close a connection that does not set up")


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
    max_sessions: int = Field(default=256, gt=0, description="sessions per identity whose last result is kept")
    session_bytes: int = Field(default=256 << 20, gt=0, description="memory budget of those kept results")
    session_ttl_s: float = Field(default=3600.0, gt=0, description="a session's result expires after this")
    warm_workers: bool = Field(
        default=True, description="keep one worker of each kind started ahead of jobs (torch, CUDA context, ncu)"
    )
    readers_per_caller: int | None = Field(
        default=None,
        ge=0,
        description="report readers kept per caller identity (default: compile_workers, at most 4; 0: every "
        "report on a warm worker of its own)",
    )
    ncu_warmup: bool = Field(
        default=True,
        description="on a one-GPU host, warm ncu workers profile a kernel of their own before their job",
    )
    metrics_port: int | None = Field(default=None, ge=0, le=65535, description="Prometheus /metrics port")
    metrics_host: str = Field(default="127.0.0.1", description="address the /metrics endpoint binds")
    disk_budget_bytes: int = Field(
        default=20 << 30,
        gt=0,
        description="bytes the finished job workspaces may hold (the oldest go first), and uploads being received",
    )
    disk_reserve_bytes: int = Field(
        default=4 << 30,
        ge=0,
        description="free bytes the state folder's disk keeps: below them, the running job that wrote the most is "
        "stopped (0: never)",
    )
    transport: Transport = Field(default_factory=Transport)
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
        # Untrusted code runs on this host: listening beyond loopback without a token needs --insecure. The
        # metrics endpoint asks for the same token (telemetry: who calls what, how often).
        if not is_loopback(self.host) and self.jail != "required":
            raise ValueError(f"refusing to run jobs unjailed on {self.host}: only a loopback server may")
        if self.security.tokens or self.security.insecure:
            return self
        for host, what in ((self.host, "listen"), (self.metrics_host, "serve metrics")):
            if not is_loopback(host) and (what == "listen" or self.metrics_port is not None):
                raise ValueError(
                    f"refusing to {what} on {host} without a token: pass --token-file, or --insecure to accept "
                    "anyone who can reach this address"
                )
        return self

    @property
    def cache_dir(self) -> Path:
        """Content-addressed build cache (shared by all jobs, kept across restarts)."""
        return self.state_dir / "cache"

    @property
    def jobs_dir(self) -> Path:
        """Per-job workspaces."""
        return self.state_dir / "jobs"

    @property
    def uploads_dir(self) -> Path:
        """Reports being received (Analyze), until their job takes them."""
        return self.state_dir / "uploads"

    @property
    def max_receive_message_bytes(self) -> int:
        """The largest message the server reads: a request with two source files at their limit fits (4 MiB at
        the default limits); Analyze uploads come in pieces."""
        return max(4 << 20, 2 * self.limits.max_source_bytes + (64 << 10))
