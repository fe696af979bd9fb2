"""The server's commands in the `profsvc` CLI, registered as entry points of the server package.

The client's CLI (profsvc_client.cli) finds `serve` in the entry point group `profsvc.commands` and the service
it runs in its own process (no `--server`) in `profsvc.embedded`, so the client package never imports the
server. `python -m profsvc serve ...` runs the same command without the client.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import ValidationError

from profsvc.config import ServerConfig, read_tokens
from profsvc.server import app
from profsvc.telemetry import JsonFormatter
from profsvc_contract import errors
from profsvc_contract.channel import port_number

_SIZE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _size(text: str) -> int:
    """A size in bytes, with an optional K, M, G or T suffix (powers of 1024): `20G` (argparse type)."""
    number, unit = text.strip().upper().removesuffix("B"), ""
    if number[-1:] in _SIZE_UNITS:
        number, unit = number[:-1], number[-1]
    try:
        size = int(float(number) * _SIZE_UNITS[unit])
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (bytes, or a number with K, M, G or T)") from None
    if size <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive size")
    return size


def _size_or_off(text: str) -> int:
    """A size as _size reads it, or none at all (`0`, `0G`: off)."""
    return 0 if re.fullmatch(r"0+(\.0*)?[KMGT]?B?", text.strip().upper()) else _size(text)


def add_serve(commands: argparse._SubParsersAction) -> Callable[[argparse.Namespace], int]:  # type: ignore[type-arg]
    """Add `serve` to the CLI's subcommands; the function that runs it."""
    serve = commands.add_parser("serve", help="run the gRPC server")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only)")
    serve.add_argument("--port", type=port_number, default=50051)
    serve.add_argument("--state-dir", type=Path, default=None, help="build cache and job folders")
    serve.add_argument(
        "--token-file",
        type=Path,
        default=None,
        help="require a bearer token on every call: one token a line, optionally name:token (one identity each)",
    )
    serve.add_argument("--tls-cert", type=Path, default=None, help="serve TLS with this PEM certificate chain")
    serve.add_argument("--tls-key", type=Path, default=None, help="the PEM private key of --tls-cert")
    serve.add_argument("--insecure", action="store_true", help="allow a non-loopback --host without a token")
    serve.add_argument("--metrics-port", type=port_number, default=None, help="serve Prometheus /metrics on this port")
    serve.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        help="address /metrics binds (default loopback only; the endpoint asks for the same token and TLS)",
    )
    serve.add_argument(
        "--disk-budget",
        type=_size,
        default=None,
        help="bytes kept of finished jobs' folders, oldest removed first; also the most uploads in progress may "
        "hold (default 20G)",
    )
    serve.add_argument(
        "--disk-reserve",
        type=_size_or_off,
        default=None,
        help="free space the state folder's disk keeps: below it, the running job that wrote the most is stopped "
        "(default 4G; 0: never)",
    )
    serve.add_argument("--job-timeout", type=float, default=None, help="kill a job's process after this many seconds")
    serve.add_argument(
        "--shutdown-grace",
        type=float,
        default=None,
        help="on SIGTERM or SIGINT, seconds the requests in flight get to finish (default 30)",
    )
    serve.add_argument(
        "--no-warm-workers", action="store_true", help="start every worker fresh (no processes kept warm ahead of jobs)"
    )
    serve.add_argument(
        "--unjailed",
        action="store_true",
        help="run jobs without the jail (bubblewrap) on a host that has none: loopback only; every result says so",
    )
    serve.add_argument(
        "--build-timeout", type=float, default=None, help="kill a build or a module's import after this many seconds"
    )
    serve.add_argument(
        "--readers-per-caller",
        type=int,
        default=None,
        metavar="N",
        help="report readers kept per caller (default: one per CPU, at most 4; 0: every report on a warm worker)",
    )
    serve.add_argument(
        "--no-ncu-warmup",
        action="store_true",
        help="warm ncu workers do not profile a kernel of their own before their job (README: ncu's first kernel)",
    )
    serve.set_defaults(run_command=run_serve)
    return run_serve


# `serve`'s options that set a ServerConfig field (or a Limits one) only when given: (argument, field).
_GIVEN_OPTIONS = (
    ("disk_budget", "disk_budget_bytes"),
    ("disk_reserve", "disk_reserve_bytes"),
    ("readers_per_caller", "readers_per_caller"),
    ("shutdown_grace", "shutdown_grace_s"),
    ("state_dir", "state_dir"),
)
_GIVEN_LIMITS = (("job_timeout", "job_timeout_s"), ("build_timeout", "compile_timeout_s"))


def run_serve(args: argparse.Namespace) -> int:
    """`profsvc serve`: run the server until SIGTERM or SIGINT (profsvc.server.app.serve)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    options: dict[str, object] = {"host": args.host, "port": args.port, "metrics_port": args.metrics_port}
    options["metrics_host"] = args.metrics_host
    options.update({name: getattr(args, arg) for arg, name in _GIVEN_OPTIONS if getattr(args, arg) is not None})
    options["warm_workers"] = not args.no_warm_workers
    options["ncu_warmup"] = not args.no_ncu_warmup
    options["limits"] = {name: getattr(args, arg) for arg, name in _GIVEN_LIMITS if getattr(args, arg) is not None}
    if args.unjailed:
        options["jail"] = "off"
    security = {"tls_cert": args.tls_cert, "tls_key": args.tls_key, "insecure": args.insecure}
    if args.token_file is not None:
        security["tokens"] = read_tokens(args.token_file)
        security["token_file"] = args.token_file.resolve()
    try:
        config = ServerConfig(**options, security=security)
    except ValidationError as error:
        reason = error.errors()[0]["msg"].removeprefix("Value error, ")
        raise errors.InvalidRequest(reason) from None
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(app.serve(config))
    return 0


@contextlib.contextmanager
def embedded() -> Iterator[str]:
    """The service in this process, for a CLI without `--server`: its loopback address while the block runs.

    The user's own code on the user's own machine: jailed where the host allows, else said in each result.
    """
    service = app.EmbeddedServer(ServerConfig(jail="auto"))
    target = service.start()
    try:
        yield target
    finally:
        service.stop()
