"""Start the gRPC server: profsvc.v1.Profiler plus the standard health and reflection services."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from profsvc.config import ServerConfig
from profsvc.host import discover
from profsvc.jail import Jail, JailLimits, probe_jail
from profsvc.scheduler.scheduler import Scheduler
from profsvc.server.auth import Authenticator, TokenInterceptor
from profsvc.server.interceptors import RequestInterceptor
from profsvc.server.metrics_http import serve_metrics
from profsvc.server.servicer import ProfilerServicer
from profsvc.telemetry import JsonFormatter, Telemetry
from profsvc_contract._proto import profiler_pb2 as pb
from profsvc_contract._proto import profiler_pb2_grpc as pb_grpc
from profsvc_contract.channel import MAX_MESSAGE_BYTES

log = logging.getLogger("profsvc.server")
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Profiler"].full_name


@dataclass
class RunningServer:
    """A started server and the port it listens on."""

    server: grpc.aio.Server
    port: int
    scheduler: Scheduler
    health: health.aio.HealthServicer
    metrics: WSGIServer | None

    async def close(self) -> None:
        """Stop serving at once, then the warm workers and the metrics endpoint."""
        await self.server.stop(grace=None)
        await self.scheduler.close()
        if self.metrics is not None:
            self.metrics.shutdown()
            self.metrics.server_close()


def _credentials(config: ServerConfig) -> grpc.ServerCredentials | None:
    """The TLS credentials, read before anything starts (a missing file ends the start with one line)."""
    if config.security.tls_cert is None or config.security.tls_key is None:
        return None
    try:
        key, cert = config.security.tls_key.read_bytes(), config.security.tls_cert.read_bytes()
    except OSError as error:
        raise OSError(f"cannot read the TLS key or certificate {error.filename}: {error.strerror}") from None
    return grpc.ssl_server_credentials([(key, cert)])


def _serve_metrics(config: ServerConfig, telemetry: Telemetry, authenticator: Authenticator) -> WSGIServer | None:
    """The /metrics endpoint, bound before anything that would keep the process alive (warm workers, grpc)."""
    if config.metrics_port is None:
        return None
    security = config.security
    tls = (security.tls_cert, security.tls_key) if security.tls_cert and security.tls_key else None
    try:
        return serve_metrics(config.metrics_host, config.metrics_port, telemetry.registry, authenticator, tls)
    except OSError as error:
        where = f"{config.metrics_host}:{config.metrics_port}"
        raise OSError(f"cannot serve metrics on {where}: {error.strerror or error}") from None


def server_options(config: ServerConfig) -> list[tuple[str, int]]:
    """gRPC's limits: what one connection may hold of the server, and the largest message it reads."""
    transport = config.transport

    def ms(seconds: float) -> int:
        return int(seconds * 1000)

    return [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", config.max_receive_message_bytes),
        ("grpc.max_concurrent_streams", transport.max_concurrent_streams),
        ("grpc.keepalive_time_ms", ms(transport.keepalive_s)),
        ("grpc.keepalive_timeout_ms", ms(transport.keepalive_timeout_s)),
        ("grpc.max_connection_idle_ms", ms(transport.max_connection_idle_s)),
        ("grpc.max_connection_age_ms", ms(transport.max_connection_age_s)),
        ("grpc.max_connection_age_grace_ms", ms(transport.max_connection_age_grace_s)),
        ("grpc.server_handshake_timeout_ms", ms(transport.handshake_timeout_s)),
        # Without this, grpc binds with SO_REUSEPORT: a second server on a port in use starts silently and the
        # two share its requests.
        ("grpc.so_reuseport", 0),
    ]


async def _jail(config: ServerConfig) -> Jail | None:
    """This host's jail; OSError where the configuration requires one and the host has none."""
    if config.jail == "off":
        log.warning("jobs run unjailed (--unjailed): they can read and write what the server can")
        return None
    hidden = [p for p in (config.security.token_file, config.security.tls_cert, config.security.tls_key) if p]
    limits = JailLimits(memory_bytes=config.limits.job_memory_bytes, pids_max=config.limits.job_tasks)
    jail = await probe_jail(config.state_dir, hidden_files=hidden, limits=limits)
    if isinstance(jail, str):
        if config.jail == "required":
            raise OSError(f"cannot jail jobs on this host: {jail} (profsvc serve --unjailed runs them unjailed)")
        log.warning("jobs run unjailed: %s", jail)
        return None
    log.info("jobs run jailed: %s", jail.describe())
    return jail


def _bind(server: grpc.aio.Server, address: str, credentials: grpc.ServerCredentials | None) -> int:
    """Listen on address; the port, 0 when it cannot be bound (grpc raises where older versions returned 0)."""
    try:
        return (
            server.add_insecure_port(address) if credentials is None else server.add_secure_port(address, credentials)
        )
    except RuntimeError:
        return 0


async def start_server(config: ServerConfig) -> RunningServer:
    """Probe the host, bind, and start serving (returns once listening)."""
    host = await discover(config.ncu_path, config.nvcc_path)
    jail = await _jail(config)
    credentials = _credentials(config)
    telemetry = Telemetry()
    authenticator = Authenticator(config.security.tokens)
    metrics = _serve_metrics(config, telemetry, authenticator)
    scheduler = Scheduler(config, host, jail, telemetry)
    await scheduler.start()
    interceptors: list[grpc.aio.ServerInterceptor] = [RequestInterceptor(telemetry)]
    if authenticator.required:
        interceptors.append(TokenInterceptor(authenticator))
    server = grpc.aio.server(options=server_options(config), interceptors=interceptors)
    pb_grpc.add_ProfilerServicer_to_server(ProfilerServicer(config, scheduler, authenticator), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    port = _bind(server, f"{config.host}:{config.port}", credentials)
    running = RunningServer(server=server, port=port, scheduler=scheduler, health=health_servicer, metrics=metrics)
    if port == 0:
        await running.close()
        causes = "is the port in use, the host an address of this machine"
        causes += ", the TLS key and certificate a pair?" if credentials is not None else "?"
        raise OSError(f"cannot listen on {config.host}:{config.port} ({causes})")
    await server.start()
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    if host.unavailable_reason:
        log.warning("profiling unavailable: %s", host.unavailable_reason)
    log.info(
        "profsvc listening on %s:%d (%s, %s)",
        config.host,
        port,
        "TLS" if config.security.tls_cert else "plaintext",
        f"{len(config.security.tokens)} token(s) accepted" if authenticator.required else "no token",
    )
    return running


async def serve(config: ServerConfig) -> None:
    """Run until SIGTERM or SIGINT, then drain: requests in flight get the grace, new ones are refused.

    A second signal cuts the grace short. The handlers also replace an ignored SIGINT (a server started in
    the background of a script), so both signals always stop the server, and stop it the same way.
    """
    running = await start_server(config)
    signals = asyncio.Queue[int]()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, signals.put_nowait, signum)
    try:
        signum = await signals.get()
        log.info(
            "%s: finishing the requests in flight (up to %g s), refusing new ones",
            signal.Signals(signum).name,
            config.shutdown_grace_s,
        )
        await running.health.enter_graceful_shutdown()
        draining = asyncio.create_task(running.server.stop(grace=config.shutdown_grace_s))
        second = asyncio.create_task(signals.get())
        await asyncio.wait((draining, second), return_when=asyncio.FIRST_COMPLETED)
        if not draining.done():
            log.info("second signal: cancelling the requests in flight")
            await running.server.stop(grace=None)
            await draining
        second.cancel()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await running.close()
        log.info("profsvc stopped")


class EmbeddedServer:
    """The same service on a loopback port in a background thread of this process.

    The CLI uses it when no --server is given, so embedded and remote use go
    through one code path (the gRPC client).
    """

    def __init__(self, config: ServerConfig, *, keep_warm: bool = False) -> None:
        # One command's process: nothing to keep warm for (a warm worker pays off from the second job). A Dask
        # worker's service (profsvc.cluster) runs many jobs: it keeps them warm.
        update: dict[str, object] = {"host": "127.0.0.1", "port": 0}
        if not keep_warm:
            update["warm_workers"] = False
        self._config = config.model_copy(update=update)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="profsvc-embedded", daemon=True)
        self._running: RunningServer | None = None

    def start(self) -> str:
        """Start serving; return the target to connect to. The server's log goes to STATE_DIR/server.log."""
        self._config.state_dir.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(self._config.state_dir / "server.log")
        handler.setFormatter(JsonFormatter())
        logger = logging.getLogger("profsvc")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(start_server(self._config), self._loop)
        self._running = future.result()
        return f"127.0.0.1:{self._running.port}"

    def stop(self) -> None:
        """Stop the server and its thread."""
        if self._running is not None:
            asyncio.run_coroutine_threadsafe(self._running.server.stop(grace=1), self._loop).result()
            asyncio.run_coroutine_threadsafe(self._running.close(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
