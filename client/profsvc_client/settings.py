"""Where the client connects and how: flags first, then environment, then a config file.

Environment: PROFSVC_SERVER, PROFSVC_TOKEN, PROFSVC_TLS_CA (a PEM file; setting
it turns TLS on). Config file: $PROFSVC_CONFIG or ~/.config/profsvc/client.toml:

    server = "gpu-host:50051"
    token_file = "~/.config/profsvc/token"
    tls = true
    tls_ca = "~/.config/profsvc/ca.pem"
"""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr

from profsvc_contract.errors import InvalidRequest
from profsvc_contract.tokens import checked_token


class ClientSettings(BaseModel):
    """Resolved connection settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    server: str = ""
    token: SecretStr | None = None
    tls: bool = False
    tls_ca: Path | None = None

    def root_certificates(self) -> bytes | None:
        """The CA bundle to verify the server with (None: the system's roots)."""
        return self.tls_ca.read_bytes() if self.tls_ca else None


# The keys a client config file may hold.
FILE_KEYS = ("server", "token_file", "tls", "tls_ca")


def config_path() -> Path:
    """The client config file's location."""
    return Path(os.environ.get("PROFSVC_CONFIG") or Path.home() / ".config" / "profsvc" / "client.toml")


def read_token(path: Path) -> str:
    """The token in a file (surrounding whitespace dropped), checked."""
    try:
        text = path.expanduser().read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest(f"the token file {path} is not UTF-8 text") from None
    return checked_token(text.strip(), str(path))


def _file_settings(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise InvalidRequest(f"the client config {path} cannot be read: {error}") from None
    for key in data:
        if key not in FILE_KEYS:
            close = difflib.get_close_matches(key, FILE_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (it knows {', '.join(FILE_KEYS)})"
            raise InvalidRequest(f"the client config {path} has an unknown key {key!r}{hint}")
    settings: dict[str, Any] = {}
    if "server" in data:
        settings["server"] = str(data["server"])
    if "token_file" in data:
        settings["token"] = read_token(Path(str(data["token_file"])))
    if "tls" in data:
        settings["tls"] = bool(data["tls"])
    if "tls_ca" in data:
        settings["tls_ca"] = Path(str(data["tls_ca"])).expanduser()
    return settings


def _env_settings() -> dict[str, Any]:
    settings: dict[str, Any] = {}
    if os.environ.get("PROFSVC_SERVER"):
        settings["server"] = os.environ["PROFSVC_SERVER"]
    if os.environ.get("PROFSVC_TOKEN"):
        settings["token"] = checked_token(os.environ["PROFSVC_TOKEN"], "PROFSVC_TOKEN")
    if os.environ.get("PROFSVC_TLS_CA"):
        settings["tls_ca"] = Path(os.environ["PROFSVC_TLS_CA"])
        settings["tls"] = True
    return settings


def resolve_settings(
    *, server: str = "", token_file: Path | None = None, tls: bool = False, tls_ca: Path | None = None
) -> ClientSettings:
    """Merge flags over environment over the config file."""
    merged = _file_settings(config_path())
    merged.update(_env_settings())
    if server:
        merged["server"] = server
    if token_file is not None:
        merged["token"] = read_token(token_file)
    if tls or tls_ca is not None:
        merged["tls"] = True
    if tls_ca is not None:
        merged["tls_ca"] = tls_ca
    return ClientSettings(**merged)
