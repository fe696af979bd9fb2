"""Move data between protobuf messages and the pydantic models of `models`.

Both sides share field names, so one pair of descriptor-driven functions serves
every message; enums cross as their value names without the enum's prefix, in
lower case.
"""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf.descriptor import EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message
from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
P = TypeVar("P", bound=Message)


def _enum_prefix(enum: EnumDescriptor) -> str:
    # Proto style: every value of enum FooBar starts with FOO_BAR_.
    return "".join("_" + c if c.isupper() and i else c for i, c in enumerate(enum.name)).upper() + "_"


def _enum_to_str(enum: EnumDescriptor, number: int) -> str:
    name = enum.values_by_number[number].name if number in enum.values_by_number else str(number)
    return name.removeprefix(_enum_prefix(enum)).lower()


def _enum_from_str(enum: EnumDescriptor, value: str) -> int:
    return enum.values_by_name[_enum_prefix(enum) + str(value).upper()].number


def _scalar_out(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return message_to_dict(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        return _enum_to_str(field.enum_type, value)
    return value


def message_to_dict(message: Message) -> dict[str, Any]:
    """Every field of a message as plain Python data (unset optionals as None)."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {k: _scalar_out(value_field, v) for k, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [_scalar_out(field, v) for v in value]
        elif field.has_presence and field.containing_oneof is None and field.type != FieldDescriptor.TYPE_MESSAGE:
            out[field.name] = _scalar_out(field, value) if message.HasField(field.name) else None
        elif field.containing_oneof is not None and not message.HasField(field.name):
            continue
        else:
            out[field.name] = _scalar_out(field, value)
    return out


def _fill_map(target: Any, field: FieldDescriptor, value: dict[str, Any]) -> None:
    value_field = field.message_type.fields_by_name["value"]
    for key, item in value.items():
        if value_field.type == FieldDescriptor.TYPE_MESSAGE:
            _fill(target[key], item)
        else:
            target[key] = item


def _fill_repeated(target: Any, field: FieldDescriptor, value: list[Any]) -> None:
    for item in value:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            _fill(target.add(), item)
        elif field.type == FieldDescriptor.TYPE_ENUM:
            target.append(_enum_from_str(field.enum_type, item))
        else:
            target.append(item)


def _fill(message: Message, data: dict[str, Any]) -> None:
    fields = message.DESCRIPTOR.fields_by_name
    for name, value in data.items():
        field = fields[name]
        if value is None:
            continue
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            _fill_map(getattr(message, name), field, value)
        elif field.is_repeated:
            _fill_repeated(getattr(message, name), field, value)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            _fill(getattr(message, name), value)
        elif field.type == FieldDescriptor.TYPE_ENUM:
            setattr(message, name, _enum_from_str(field.enum_type, value))
        else:
            try:
                setattr(message, name, value)
            except (ValueError, TypeError):
                # E.g. a negative count, or one past 32 bits: protobuf's own message names neither field nor value.
                raise ValueError(f"{name} = {value!r} is out of range") from None


def enum_value(message: Message, field: str) -> str:
    """An enum field of a message as the models spell its value ("fp16" for PRECISION_FP16; a number no value
    has, as its digits)."""
    return _enum_to_str(message.DESCRIPTOR.fields_by_name[field].enum_type, getattr(message, field))


def enum_number(message_type: type[Message], field: str, value: str) -> int:
    """The number of an enum field's value as the models spell it (PRECISION_FP16's for "fp16")."""
    return _enum_from_str(message_type.DESCRIPTOR.fields_by_name[field].enum_type, value)


def to_model(message: Message, model: type[M]) -> M:
    """Convert a protobuf message into its pydantic model."""
    return model.model_validate(message_to_dict(message))


def to_proto(model: BaseModel, message_type: type[P]) -> P:
    """Convert a pydantic model into its protobuf message."""
    message = message_type()
    try:
        _fill(message, model.model_dump(mode="python", by_alias=True))
    except ValueError as error:
        from profsvc_contract.errors import InvalidRequest

        raise InvalidRequest(str(error)) from None
    return message
