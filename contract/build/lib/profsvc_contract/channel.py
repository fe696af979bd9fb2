"""What both ends of a profsvc channel agree on: message limits, the upload's piece size, the health service."""

from __future__ import annotations

import argparse

# Results can be large; gRPC's default limit is 4 MiB.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
# Analyze uploads a report in pieces of this size (the server refuses any message over 4 MiB).
UPLOAD_CHUNK_BYTES = 1024 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]
# The trailing metadata key of gRPC's rich status (google.rpc.Status), where the reason code travels.
STATUS_DETAILS_KEY = "grpc-status-details-bin"
# The service whose health a several-server channel watches (the server marks it NOT_SERVING while it drains).
HEALTH_SERVICE = "profsvc.v1.Profiler"


def port_number(text: str) -> int:
    """A TCP port number (an argparse type of both CLIs: out of range is a usage error, not a traceback)."""
    port = int(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535)")
    return port
