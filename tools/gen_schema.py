"""Write the JSON Schema of every profsvc JSON document to docs/schema/, from the pydantic models.

Run `python tools/gen_schema.py` after changing a result model; `--check` exits 1 when the committed schemas
differ from what the models generate (CI runs it through tests/unit/test_document.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "docs" / "schema"
sys.path[:0] = [str(ROOT / "contract"), str(ROOT / "tools")]

from generated import write_or_check  # noqa: E402

from profsvc_contract import models  # noqa: E402
from profsvc_contract.document import SCHEMA_VERSION  # noqa: E402

# One document per command's result: file stem -> model.
DOCUMENTS = {
    "profile": models.ProfileResult,
    "repeat": models.RepeatResult,
    "evaluate": models.EvaluateResult,
    "check": models.CorrectnessResult,
    "time": models.BenchmarkResult,
    "lint": models.StaticCheckResult,
    "compile": models.CompileResult,
    "capabilities": models.Capabilities,
}
_VERSION = {"const": SCHEMA_VERSION, "description": "the schema's version: raised when a field changes meaning"}


def _document(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    properties = {"schema_version": _VERSION, **schema.get("properties", {})}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"profsvc/{SCHEMA_VERSION}/{name}.schema.json",
        **{k: v for k, v in schema.items() if k != "properties"},
        "properties": properties,
        "required": ["schema_version", *schema.get("required", [])],
    }


def _error_document() -> dict[str, Any]:
    error = {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "description": "the reason code (profsvc_contract.errors.Reason)"},
            "message": {"type": "string"},
            "exit_code": {"type": "integer"},
            "request_id": {"type": "string"},
        },
        "required": ["reason", "message", "exit_code"],
    }
    schema = {
        "title": "Error",
        "description": "An error that stopped a command (bad input, no server), with --format json.",
        "type": "object",
        "properties": {"ok": {"const": False}, "error": error},
        "required": ["ok", "error"],
    }
    return _document("error", schema)


def generate() -> dict[str, str]:
    """{file name: schema text} for every document."""
    schemas = {
        name: _document(name, model.model_json_schema(mode="serialization")) for name, model in DOCUMENTS.items()
    }
    schemas["error"] = _error_document()
    return {f"{name}.schema.json": json.dumps(schema, indent=2) + "\n" for name, schema in schemas.items()}


def main() -> int:
    """Write the schemas, or with --check compare them with the committed ones."""
    description = (__doc__ or "").splitlines()[0]
    return write_or_check(description, generate(), OUT_DIR, "JSON schemas", "python tools/gen_schema.py")


if __name__ == "__main__":
    sys.exit(main())
