"""Start the gRPC server: profsvc.v1.Profiler plus the standard health and reflection services."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from profsvc.config import ServerConfig
from profsvc.host import discover
from profsvc.sandbox import NO_NETWORK_ISOLATION, probe_sandbox
from profsvc.scheduler.scheduler import Scheduler
from profsvc.server.auth import TokenInterceptor
from profsvc.server.interceptors import RequestInterceptor
from profsvc.server.servicer import ProfilerServicer
from profsvc.telemetry import JsonFormatter, Telemetry
from profsvc_client._proto import profiler_pb2 as pb
from profsvc_client._proto import profiler_pb2_grpc as pb_grpc
from profsvc_client.client import CHANNEL_OPTIONS

log = logging.getLogger("profsvc.server")
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Profiler"].full_name


@dataclass
class RunningServer:
    """A started server and the port it listens on."""

    server: grpc.aio.Server
    port: int
    scheduler: Scheduler
    health: health.aio.HealthServicer


def _credentials(config: ServerConfig) -> grpc.ServerCredentials | None:
    """The TLS credentials, read before anything starts (a missing file ends the start with one line)."""
    if config.security.tls_cert is None or config.security.tls_key is None:
        return None
    try:
        key, cert = config.security.tls_key.read_bytes(), config.security.tls_cert.read_bytes()
    except OSError as error:
        raise OSError(f"cannot read the TLS key or certificate {error.filename}: {error.strerror}") from None
    return grpc.ssl_server_credentials([(key, cert)])


def _serve_metrics(config: ServerConfig, telemetry: Telemetry) -> None:
    """The /metrics endpoint, bound before anything that would keep the process alive (warm workers, grpc)."""
    if config.metrics_port is None:
        return
    try:
        telemetry.serve_http(config.host, config.metrics_port)
    except OSError as error:
        raise OSError(f"cannot serve metrics on {config.host}:{config.metrics_port}: {error.strerror}") from None


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
    sandbox = await probe_sandbox(config.limits.cpu_job_memory_bytes)
    if not sandbox.isolates_network:
        log.warning(NO_NETWORK_ISOLATION)
    credentials = _credentials(config)
    telemetry = Telemetry()
    _serve_metrics(config, telemetry)
    scheduler = Scheduler(config, host, sandbox, telemetry)
    await scheduler.start()
    token = config.security.token
    interceptors: list[grpc.aio.ServerInterceptor] = [RequestInterceptor(telemetry)]
    if token is not None:
        interceptors.append(TokenInterceptor(token.get_secret_value()))
    # Without this, grpc binds with SO_REUSEPORT: a second server on a port in use starts silently and the two
    # share its requests.
    server = grpc.aio.server(options=[*CHANNEL_OPTIONS, ("grpc.so_reuseport", 0)], interceptors=interceptors)
    pb_grpc.add_ProfilerServicer_to_server(ProfilerServicer(config, scheduler), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    port = _bind(server, f"{config.host}:{config.port}", credentials)
    if port == 0:
        await scheduler.close()
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
        "token required" if token is not None else "no token",
    )
    return RunningServer(server=server, port=port, scheduler=scheduler, health=health_servicer)


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
        await running.server.stop(grace=None)
        await running.scheduler.close()
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
            asyncio.run_coroutine_threadsafe(self._running.scheduler.close(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
