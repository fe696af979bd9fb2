"""What the C++/CUDA strings of a candidate hold: which look like source, the kernels they define and launch.

Regular expressions over the text with comments blanked out: no C++ parser, so
each helper answers only what a narrow pattern can tell reliably.
"""

from __future__ import annotations

import ast
import bisect
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from profsvc.staticcheck.findings import Hit

# A string is treated as C++/CUDA source when it contains one of these.
SOURCE_MARKER = re.compile(r"__global__|#include|\btorch::|\bat::|__device__|PYBIND11_MODULE|TORCH_LIBRARY|<<<")
# Every pattern and scan here is linear in the text: a source of the server's largest size (1 MiB) is checked in
# well under a second, however it is written (an unclosed comment runs to the end, qualifiers are few, brackets
# are paired once per text).
# Comments, and the literals that may hold a "/*" or "//" that starts none (kept as they are): raw strings,
# strings, and characters (a quote after a word character is a digit separator, 1'000). A literal left open ends
# at its line's end (a raw string at the text's), as the compiler would end it with an error: each match runs
# forward from one quote only, never rescanned from a later one.
_COMMENT = re.compile(
    r"""(?P<literal>(?<!\w)(?:u8|[uUL])?R"(?P<delimiter>[^()\\\s"]{0,16})\(.*?(?:\)(?P=delimiter)"|\Z)"""
    r"""|"(?:[^"\\\n]|\\.)*+(?:"|(?=\n)|\Z)|(?<!\w)'(?:[^'\\\n]|\\.)*+(?:'|(?=\n)|\Z))"""
    r"|//[^\n]*|/\*.*?(?:\*/|\Z)",
    re.DOTALL,
)
_KERNEL = re.compile(r"__global__\s+(?:[\w:<>,*&]+\s++|__launch_bounds__\s*\([^)]*\)\s*){0,24}(\w+)\s*\(")
# name<<<...>>> and name<T><<<...>>>
_LAUNCH = re.compile(r"\b(\w+)\s*(?:<[^<>;]*>\s*)?<<<")
# Work a host function starts without a <<< of its own: launch APIs, graphs, libraries that launch kernels.
LAUNCH_API = re.compile(
    r"\bcu(?:da)?LaunchKernel\w*|\bcu(?:da)?LaunchCooperativeKernel\w*|\bcudaGraphLaunch\b|\bcub::Device\w+"
    r"|\bthrust::\w+|\bcutlass::\w+|\bcublas\w*\s*\(|\bcublasLt\w*|\bcudnn\w*\s*\(|\bcufft\w*\s*\(|\bcusparse\w*\s*\("
)
_MEMSET = re.compile(r"\bcu(?:da)?Memset\w*")
_CALL = re.compile(r"\b(\w+)\s*\(")
_EXPORT = re.compile(r'\.def\(\s*"(\w+)"\s*,\s*&?\s*([\w:]+)')
# Tables worked out per text (brackets, lines, calls, bindings) for the texts of the check under way; the
# analyzer clears them when a check ends (clear_caches).
_CACHED_TEXTS = 16


@dataclass(frozen=True)
class CppString:
    """One string literal of the module that holds C++/CUDA source, comments blanked (offsets kept)."""

    node: ast.Constant
    text: str


def blank_comments(source: str) -> str:
    """Comments replaced by spaces, newlines kept, so offsets still map to lines; string literals kept."""
    return _COMMENT.sub(lambda m: m.group() if m["literal"] else re.sub(r"[^\n]", " ", m.group()), source)


def cpp_strings(nodes: Iterable[ast.AST]) -> list[CppString]:
    """Every string literal among the nodes that looks like C++/CUDA source."""
    return [
        CppString(node, blank_comments(node.value))
        for node in nodes
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SOURCE_MARKER.search(node.value)
    ]


@functools.lru_cache(maxsize=_CACHED_TEXTS)
def _pairs(text: str, opening: str, closing: str) -> dict[int, int]:
    """Each opening bracket's offset mapped to its closing one's, in one pass (unclosed ones left out)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for match in re.finditer(f"[{re.escape(opening + closing)}]", text):
        if match.group() == opening:
            stack.append(match.start())
        elif stack:
            pairs[stack.pop()] = match.start()
    return pairs


def body_at(text: str, open_brace: int) -> str | None:
    """The text between a '{' and its matching '}', None when the braces do not close."""
    close = _pairs(text, "{", "}").get(open_brace)
    return None if close is None else text[open_brace + 1 : close]


_BODY_OR_END = re.compile(r"\s*(?:const\s*)?(?:noexcept\s*)?(\{|;)")


def _after_parameters(text: str, open_paren: int) -> int | None:
    """The offset of the '{' that opens a function's body after its parameter list; None for a declaration."""
    close = _pairs(text, "(", ")").get(open_paren)
    if close is None:
        return None
    match = _BODY_OR_END.match(text, close + 1)
    return match.start(1) if match and match.group(1) == "{" else None


def kernels(text: str) -> dict[str, bool]:
    """The __global__ functions a source defines, each with whether its body does anything at all."""
    found: dict[str, bool] = {}
    for match in _KERNEL.finditer(text):
        brace = _after_parameters(text, match.end() - 1)
        if brace is None:
            continue
        body = body_at(text, brace)
        found[match.group(1)] = found.get(match.group(1), False) or bool(body and body.strip(" \t\n;"))
    return found


def launches(text: str) -> set[str]:
    """Names launched with the <<<...>>> syntax."""
    return {m.group(1) for m in _LAUNCH.finditer(text)}


@functools.lru_cache(maxsize=_CACHED_TEXTS)
def _calls(text: str) -> dict[str, list[tuple[int, int]]]:
    """Each name followed by '(' (a call or a definition), with the (start, end) of every such place, in one pass."""
    places: dict[str, list[tuple[int, int]]] = {}
    for match in _CALL.finditer(text):
        places.setdefault(match.group(1), []).append((match.start(), match.end()))
    return places


@functools.lru_cache(maxsize=1024)
def host_function(text: str, name: str) -> tuple[list[str], str, int] | None:
    """The parameter names, body and body offset of the host function `name` defined in the source, if any."""
    for start, end_of_match in _calls(text).get(name, ()):
        end = start
        while end > 0 and text[end - 1].isspace():
            end -= 1
        before = text[max(0, end - 6) : end]
        if not before or before[-1] in "=,(.>" or before.endswith(("return", "<<<")):
            continue  # a call, not a definition
        brace = _after_parameters(text, end_of_match - 1)
        if brace is None:
            continue
        body = body_at(text, brace)
        if body is None:
            continue
        params_text = text[end_of_match : text.rindex(")", end_of_match, brace)]
        params = [_parameter_name(p) for p in _split_parameters(params_text)]
        return [p for p in params if p], body, brace + 1
    return None


@functools.lru_cache(maxsize=_CACHED_TEXTS)
def _exports(text: str) -> dict[str, str]:
    """Each Python-visible name bound with m.def("name", &impl) and its impl (the first binding of a name)."""
    bound: dict[str, str] = {}
    for match in _EXPORT.finditer(text):
        bound.setdefault(match.group(1), match.group(2).rsplit("::", 1)[-1])
    return bound


def exported_name(text: str, name: str) -> str:
    """The C++ function behind a Python-visible name: m.def("name", &impl) binds impl; else the name itself."""
    return _exports(text).get(name, name)


def clear_caches() -> None:
    """Drop what was worked out per text: a check of a 1 MiB source would otherwise keep its tables."""
    for cached in (_pairs, _line_starts, _calls, _exports, host_function):
        cached.cache_clear()


def string_hit(node: ast.Constant, source: str, offset: int, rule_id: str, detail: str) -> Hit:
    """A hit at an offset inside a string literal, mapped to the candidate's line and column."""
    starts = _line_starts(source)
    newlines = bisect.bisect_right(starts, offset) - 1
    # Escaped newlines ("\\n" in a one-line literal) make the count overshoot: stay inside the literal.
    line = min(node.lineno + newlines, node.end_lineno or node.lineno)
    column = offset - starts[newlines] + 1 if newlines else node.col_offset + 1
    return Hit(rule_id, line, column, detail)


@functools.lru_cache(maxsize=_CACHED_TEXTS)
def _line_starts(source: str) -> list[int]:
    """The offsets where lines start: 0, then one past each newline."""
    return [0, *(match.end() for match in re.finditer("\n", source))]


def _split_parameters(text: str) -> list[str]:
    parts: list[str] = []
    depth, current = 0, ""
    for char in text:
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current] if current.strip() else parts


def _parameter_name(parameter: str) -> str | None:
    words = re.findall(r"\w+", parameter.split("=")[0])
    return words[-1] if len(words) >= 2 else None


def launch_gap(text: str) -> str | None:
    """Why sources launch no work of their own (None when they launch some): the reason for no_custom_kernel."""
    if LAUNCH_API.search(text):
        return None
    defined = kernels(text)
    launched = launches(text)
    # A launch of a kernel defined elsewhere (a header, a macro) counts: only an empty body is known to do nothing.
    if any(defined.get(name, True) for name in launched):
        return None
    if launched:
        return f"the kernels it launches ({', '.join(sorted(launched))}) have empty bodies"
    if defined:
        return f"it defines {', '.join(sorted(defined))} but never launches {'it' if len(defined) == 1 else 'them'}"
    if _MEMSET.search(text):
        return "it only calls cudaMemset"
    return "its source defines no __global__ kernel"
