"""Format a figure's value with its unit for people (values stay exact in JSON); shared by the CLI and the server."""

from __future__ import annotations

_SCALED = {
    "ns": ((1e6, "ms"), (1e3, "μs"), (1.0, "ns")),
    "byte": ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B")),
    "byte/s": ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1.0, "B/s")),
    "hz": ((1e9, "GHz"), (1e6, "MHz"), (1.0, "Hz")),
    "flop": ((1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP"), (1.0, "FLOP")),
    "flop/s": ((1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s"), (1.0, "FLOP/s")),
}


def format_number(value: float) -> str:
    """A number without unit: integers with thousands separators, others to about three digits."""
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def format_value(value: float | None, unit: str) -> str:
    """'2.78 μs', '38.4 kB', '70.3 %', '3.67 sector/request'; 'n/a' when not collected."""
    if value is None:
        return "n/a"
    if unit == "%":
        return f"{value:.1f} %"
    for scale, name in _SCALED.get(unit, ()):
        if abs(value) >= scale or scale == 1.0:
            return f"{format_number(value / scale)} {name}"
    return f"{format_number(value)} {unit}".rstrip()
