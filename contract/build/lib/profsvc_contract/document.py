"""Results as JSON documents: what `--format json` prints and `--out DIR` keeps, in one stable form.

A document starts with `schema_version`, then the result's fields in the model's order; maps keyed by data
(figures, timings) come in key order whatever order the wire delivered them in; a result that did not fail
carries no `error` object. An error that stopped the command (bad input, no server) is a document too, with
its reason code and the exit code the command ends with.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel

ResultT = TypeVar("ResultT", bound=BaseModel)

# Raised when a field is renamed, removed or changes meaning; new fields keep it.
SCHEMA_VERSION = 1


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        if "error" in value and isinstance(value["error"], dict) and not value["error"].get("kind"):
            value = {k: v for k, v in value.items() if k != "error"}
        return {k: _stable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _ordered_maps(model: BaseModel, data: dict[str, Any]) -> dict[str, Any]:
    """`data` (the model's dump) with every dict-typed field of the model, at any depth, in key order."""
    for name in type(model).model_fields:
        if name not in data:
            continue
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            data[name] = _ordered_maps(value, data[name])
        elif isinstance(value, list):
            data[name] = [
                _ordered_maps(item, dumped) if isinstance(item, BaseModel) else dumped
                for item, dumped in zip(value, data[name], strict=True)
            ]
        elif isinstance(value, dict):
            data[name] = {k: data[name][k] for k in sorted(data[name])}
    return data


def result_document(result: BaseModel) -> dict[str, Any]:
    """The result as a JSON-ready document (see the module's text)."""
    body = _stable(_ordered_maps(result, result.model_dump(mode="json")))
    return {"schema_version": SCHEMA_VERSION, **body}


def error_document(reason: str, message: str, exit_code: int, request_id: str = "") -> dict[str, Any]:
    """An error that stopped a command, as a document."""
    error = {"reason": reason, "message": message, "exit_code": exit_code}
    if request_id:
        error["request_id"] = request_id
    return {"schema_version": SCHEMA_VERSION, "ok": False, "error": error}


def dumps(document: dict[str, Any]) -> str:
    """The document as indented JSON text, ending in a newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def read_document(text: str, model: type[ResultT]) -> ResultT:
    """A document back as its result model (a document of a newer schema is refused: its fields may differ)."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("a profsvc JSON document is an object")
    found = data.pop("schema_version", None)
    if not isinstance(found, int) or found > SCHEMA_VERSION:
        raise ValueError(f"schema_version {found!r}: this reader knows schema {SCHEMA_VERSION} and older")
    return model.model_validate(data)
