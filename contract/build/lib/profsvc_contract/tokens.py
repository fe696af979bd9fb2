"""What a bearer token may hold: what an HTTP/2 header can carry (printable ASCII, no spaces)."""

from __future__ import annotations

from profsvc_contract.errors import InvalidRequest


def checked_token(token: str, origin: str) -> str:
    """A token a gRPC header can carry, else one clear error naming its origin."""
    if not token or not all(33 <= ord(c) <= 126 for c in token):
        raise InvalidRequest(f"the token from {origin} is empty or holds characters other than printable ASCII")
    return token
