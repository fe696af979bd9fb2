"""Keep the torch headers out of nvcc's translation unit of a load_inline extension.

torch's load_inline compiles the user's CUDA source, which includes
`torch/extension.h`, with nvcc: about 60 s, nearly all of it the torch headers
(the kernel alone compiles in under a second). This module splits that source
in two, without changing a line of what the user wrote:

- the CUDA part (kernels, device code, macros, plain declarations, plain host
  helpers) stays in `cuda.cu`, line for line where it was, with the torch
  includes and the torch host functions blanked out, plus one small launcher
  per kernel the host code launches (`k<<<g, b, s, st>>>(...)` wrapped in a
  plain function);
- the torch host functions go to `main.cpp`, which g++ compiles with a
  precompiled `torch/extension.h`, their launches rewritten as calls to those
  launchers; plain host helpers they call are copied there (static or inline
  ones) or declared there (the others).

It returns None whenever the source does something this scanner does not
follow (top-level conditional compilation, namespaces, templated launches,
global variables): the caller then builds the source as torch would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

LAUNCHER_PREFIX = "__profsvc_launch_"
# The three lines cuda.cu starts with, as many as torch's implicit headers (hotspot line mapping relies on it).
CUDA_PRELUDE = "#include <cuda.h>\n#include <cuda_runtime.h>\n#include <cstddef>"
HOST_PRELUDE = "#include <torch/extension.h>\n#include <cuda_runtime.h>"

_TORCH = re.compile(r"\b(?:torch|at|c10|pybind11|py)::|\bTORCH_|\bAT_[A-Z_]+\b|\bTensor\b|\bC10_|\bPYBIND11")
_TORCH_INCLUDE = re.compile(r"#\s*include\s*[<\"](?:torch|ATen|c10|pybind11|Python)[/.]")
_CONDITIONAL = re.compile(r"#\s*(?:if|ifdef|ifndef|elif|else|endif)\b")
_DEVICE_STORAGE = re.compile(r"\b(?:__device__|__constant__|__shared__|__managed__)\b")
_DEVICE_FUNCTION = re.compile(r"\b(?:__global__|__device__)\b")
_TYPE_DECL = re.compile(r"^\s*(?:typedef|using|struct|class|union|enum|static_assert)\b|\bconstexpr\b|\bconst\b")
_TEMPLATE = re.compile(r"\btemplate\b")
# A plain host helper the host part calls: copied there when it has internal linkage, else declared there.
_INTERNAL_LINKAGE = re.compile(r"^\s*(?:static\s+(?:inline\s+)?|inline\s+(?:static\s+)?)")
# Heads whose copy or prototype could differ from the definition: left to the build as written.
_UNSURE_HELPER = re.compile(r"::|\btemplate\b|\bextern\b|\bconstexpr\b|\bauto\b|__forceinline__|=")
_SCOPE = re.compile(r"\s*(?:namespace|extern)\b")
_LAUNCH = re.compile(r"\b([A-Za-z_]\w*)\s*(<[^<>()]*>)?\s*<<<")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_ATTRIBUTES = re.compile(r"__launch_bounds__\s*\([^)]*\)|__cluster_dims__\s*\([^)]*\)|\[\[[^\]]*\]\]")
# What shapes the top level: a directive's `#` first on its line, braces and semicolons.
_STRUCTURE = re.compile(r"^[ \t]*#|[{};]", re.MULTILINE)
_SEMICOLON_NEXT = re.compile(r"[ \t]*;")
_NO_ARGUMENTS = re.compile(r"\s*\)")
_RAW_PREFIXES = ("R", "LR", "uR", "UR", "u8R")
_LITERAL_START = re.compile(r"//|/\*|['\"]")


class _Unfollowable(Exception):
    """The source does something the split cannot follow safely."""


@dataclass
class _Item:
    """One top-level piece of the source: a preprocessor line, a function, or a declaration."""

    start: int
    end: int
    kind: str  # "pp", "function", "declaration"
    head: str = ""  # for functions: the (masked) text before the body's brace


@dataclass
class SplitSources:
    """The two halves of a split load_inline source."""

    cuda: str
    host: str
    launched: list[str] = field(default_factory=list)


def _token_start(source: str, i: int) -> int:
    """Start of the identifier or number that ends right before i."""
    while i > 0 and (source[i - 1].isalnum() or source[i - 1] in "_.'"):
        i -= 1
    return i


def _quoted_end(source: str, i: int) -> int:
    """Index after the string or character literal whose quote is at i."""
    quote, j = source[i], i + 1
    # An unterminated one ends with its line, as the preprocessor has it (`#error don't`).
    while j < len(source) and source[j] not in (quote, "\n"):
        j += 2 if source[j] == "\\" else 1
    return j + 1 if j < len(source) and source[j] == quote else min(j, len(source))


def _raw_end(source: str, i: int) -> int:
    """Index after the raw string literal whose opening quote is at i."""
    open_paren = source.find("(", i)
    if open_paren < 0:
        return len(source)
    end = source.find(")" + source[i + 1 : open_paren] + '"', open_paren)
    return len(source) if end < 0 else end + open_paren - i + 1


def _literal_end(source: str, i: int) -> int:
    """Index after the comment or literal starting at i (i itself when none starts there)."""
    two = source[i : i + 2]
    if two == "//":
        end = source.find("\n", i)
        return len(source) if end < 0 else end
    if two == "/*":
        end = source.find("*/", i + 2)
        return len(source) if end < 0 else end + 2
    if source[i] == "'":
        # A digit separator (1'000) is no character literal.
        return i if source[_token_start(source, i)].isdigit() else _quoted_end(source, i)
    if source[i] == '"':
        prefix = source[_token_start(source, i) : i]
        return _raw_end(source, i) if prefix in _RAW_PREFIXES else _quoted_end(source, i)
    return i


def _mask(source: str) -> str:
    """The source with comments and literals turned into spaces: same length, newlines kept.

    Every structural question (braces, `<<<`, torch names) is asked of this text, so a brace or
    `<<<` in a comment or string cannot mislead the scanner.
    """
    out, i, copied = [], 0, 0
    while match := _LITERAL_START.search(source, i):
        i = match.start()
        end = _literal_end(source, i)
        if end == i:
            i += 1
            continue
        out.append(source[copied:i])
        out.append(re.sub(r"[^\n]", " ", source[i:end]))
        i = copied = end
    out.append(source[copied:])
    return "".join(out)


def _directive_end(code: str, i: int) -> int:
    """Index of the newline that ends the directive starting at i (continuation lines included)."""
    while True:
        end = code.find("\n", i)
        if end < 0:
            return len(code)
        if not code[i:end].rstrip(" \t\r").endswith("\\"):
            return end
        i = end + 1


class _Scanner:
    """Cuts masked source into top-level items."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.items: list[_Item] = []
        self.start = 0  # where the item being read began
        self.depth = 0
        self.head_end = 0  # the brace that opened the current top-level body

    def items_or_raise(self) -> list[_Item]:
        """The items, in order; raises _Unfollowable when the source is not shaped as expected."""
        position = 0
        while match := _STRUCTURE.search(self.code, position):
            position = self._step(match.end() - 1)
        if self.depth or self.code[self.start :].strip():
            raise _Unfollowable("unbalanced braces or an unterminated declaration")
        return self.items

    def _step(self, at: int) -> int:
        """Handle the structural character at `at`; returns where to continue."""
        token = self.code[at]
        if token == "#":
            return self._directive(at)
        if token == "{":
            if self.depth == 0:
                self.head_end = at
            self.depth += 1
        elif token == "}":
            return self._close(at)
        elif self.depth == 0:
            self._add(at + 1, "declaration")
        return at + 1

    def _add(self, end: int, kind: str, head: str = "") -> None:
        self.items.append(_Item(self.start, end, kind, head))
        self.start = end

    def _directive(self, at: int) -> int:
        if self.depth:
            return at + 1  # #pragma and the like inside a body belong to it
        if self.code[self.start : at].strip():
            raise _Unfollowable("a directive in the middle of a declaration")
        self.start = at
        self._add(_directive_end(self.code, at), "pp")
        return self.start

    def _close(self, at: int) -> int:
        self.depth -= 1
        if self.depth < 0:
            raise _Unfollowable("unbalanced }")
        if self.depth:
            return at + 1
        head = self.code[self.start : self.head_end]
        if _SEMICOLON_NEXT.match(self.code, at + 1) or ")" not in head:
            # struct/class/enum/namespace/initializer: a declaration, up to its semicolon
            semicolon = self.code.find(";", at)
            if semicolon < 0 or _SCOPE.match(head):
                raise _Unfollowable("a namespace, an extern block or an unterminated declaration")
            self._add(semicolon + 1, "declaration")
        else:
            self._add(at + 1, "function", head)
        return self.start


def _split_top(text: str, separators: str = ",") -> list[str]:
    """Split at top-level separators (outside (), [], {} and <>)."""
    parts, depth, current = [], 0, []
    for c in text:
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        if c in separators and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def _kernel_params(head: str) -> tuple[str, list[str]] | None:
    """A __global__ function head's parameter list and parameter names (None when a name is missing)."""
    open_paren = head.find("(")
    close_paren = head.rfind(")")
    if open_paren < 0 or close_paren < open_paren:
        return None
    params = head[open_paren + 1 : close_paren]
    names = []
    for param in _split_top(params):
        declarator = re.sub(r"\[[^\]]*\]", "", param.split("=")[0])
        idents = _IDENT.findall(declarator)
        if not idents or (idents[-1] == "void" and len(idents) == 1):
            continue
        if len(idents) < 2:
            return None  # an unnamed parameter
        names.append(idents[-1])
    return params.strip(), names


def _function_name(head: str) -> str:
    names = _IDENT.findall(head[: head.find("(")])
    if not names:
        raise _Unfollowable("a function without a name")
    return names[-1]


def _kernels(items: list[_Item]) -> dict[str, tuple[str, list[str]]]:
    """The launchable kernels: name to (parameter list, parameter names)."""
    kernels = {}
    for item in items:
        if item.kind != "function" or "__global__" not in item.head or _TEMPLATE.search(item.head):
            continue
        head = _ATTRIBUTES.sub(" ", item.head)
        name, params = _function_name(head), _kernel_params(head)
        if params is not None:
            kernels[name] = params
    return kernels


def _rewrite_launches(text: str, code: str, kernels: dict[str, tuple[str, list[str]]]) -> tuple[str, list[str]]:
    """Replace each `k<<<cfg>>>(args)` with `__profsvc_launch_k(cfg, 0.., args)` (code: text masked)."""
    out, launched, position = [], [], 0
    for match in _LAUNCH.finditer(code):
        name, template_args = match.group(1), match.group(2)
        if template_args or name not in kernels:
            raise _Unfollowable(f"launch of {name}: templated or not a kernel defined here")
        config_end = code.find(">>>", match.end())
        if config_end < 0:
            raise _Unfollowable(f"launch of {name}: no `>>>`")
        paren = code.find("(", config_end + 3)
        config = _split_top(code[match.end() : config_end])
        if paren < 0 or code[config_end + 3 : paren].strip() or not 2 <= len(config) <= 4:
            raise _Unfollowable(f"launch of {name}: not a plain `<<<cfg>>>(args)`")
        config += ["0"] * (4 - len(config))
        separator = "" if _NO_ARGUMENTS.match(code, paren + 1) else ", "
        out += [text[position : match.start()], f"{LAUNCHER_PREFIX}{name}({', '.join(c.strip() for c in config)}"]
        out.append(separator)
        position = paren + 1
        launched.append(name)
    if code.count("<<<") != len(launched):
        raise _Unfollowable("a launch of something other than a plain kernel name")
    out.append(text[position:])
    return "".join(out), launched


def _blank(text: str) -> str:
    """As many newlines as the text spans: keeps every later line where it was."""
    return "\n" * text.count("\n")


def _is_variable(code: str) -> bool:
    """Whether a plain (non-type, non-const) declaration defines a variable rather than declaring a function."""
    before_params = code.split("(", 1)[0]
    return "(" not in code or ("=" in before_params and "operator" not in before_params)


def _launcher_signature(name: str, params: str) -> str:
    extra = f", {params}" if params and params != "void" else ""
    return f"void {LAUNCHER_PREFIX}{name}(dim3 grid, dim3 block, size_t shared, cudaStream_t stream{extra})"


class _Halves:
    """Sends each top-level item to the CUDA part, the host part, or both."""

    def __init__(self, source: str, code: str, kernels: dict[str, tuple[str, list[str]]]) -> None:
        self.source = source
        self.code = code
        self.kernels = kernels
        self.cuda: list[str] = []
        self.includes: list[str] = []
        self.host: list[str] = []
        self.launched: list[str] = []
        self.helpers: list[tuple[int, str, str]] = []  # plain host helpers: host index, text, head
        self.host_names: set[str] = set()  # identifiers the torch host functions use
        self.position = 0

    def add(self, item: _Item) -> None:
        # What lies between items (whitespace, comments) stays in the CUDA part to keep its lines.
        self.cuda.append(self.source[self.position : item.start])
        self.position = item.end
        text, code = self.source[item.start : item.end], self.code[item.start : item.end]
        if item.kind == "pp":
            self._directive(text, code)
        elif item.kind == "function":
            self._function(text, code, item.head)
        else:
            self._declaration(text, code)

    def _directive(self, text: str, code: str) -> None:
        if _CONDITIONAL.match(code):
            raise _Unfollowable("top-level conditional compilation")
        if _TORCH_INCLUDE.match(text):
            self.cuda.append(_blank(text))
            self.includes.append(text)
        elif _TORCH.search(code):
            self.cuda.append(_blank(text))
            self.host.append(text)
        else:
            self.cuda.append(text)
            self.host.append(text)

    def _function(self, text: str, code: str, head: str) -> None:
        device_side = _DEVICE_FUNCTION.search(head)
        if device_side or not _TORCH.search(code):
            if "<<<" in code and not device_side:
                raise _Unfollowable("a plain host launcher: the host part would need its declaration")
            self.cuda.append(text)
            if not device_side:
                # Its place in the host part, filled in by result() if a torch function calls it.
                self.helpers.append((len(self.host), text, head))
                self.host.append("")
            return
        self.host_names.update(_IDENT.findall(code))
        body, names = _rewrite_launches(text, code, self.kernels)
        # Declared right before their first caller: after every type and macro their parameters can use.
        for name in names:
            if name not in self.launched:
                self.launched.append(name)
                self.host.append(_launcher_signature(name, self.kernels[name][0]) + ";")
        self.cuda.append(_blank(text))
        self.host.append(body)

    def _declaration(self, text: str, code: str) -> None:
        if _DEVICE_STORAGE.search(code) or "__global__" in code:
            self.cuda.append(text)
        elif _TORCH.search(code):
            self.cuda.append(_blank(text))
            self.host.append(text)
        elif _TYPE_DECL.search(code) or not _is_variable(code):
            # Types, constants and prototypes: both halves may need them.
            self.cuda.append(text)
            self.host.append(text)
        else:
            raise _Unfollowable("a global variable: one definition cannot live in both halves")

    def _helpers_for_host(self) -> None:
        """Copy or declare, in the host part, the plain host helpers its torch functions call."""
        for index, text, head in self.helpers:
            if _function_name(head) not in self.host_names:
                continue
            # A copy that names a kernel (cudaFuncSetAttribute(k, ...)) would not compile without the CUDA part.
            if _UNSURE_HELPER.search(head) or set(_IDENT.findall(text)) & set(self.kernels):
                raise _Unfollowable("a host helper whose copy or prototype could differ from its definition")
            self.host[index] = text if _INTERNAL_LINKAGE.match(head) else head.strip() + ";"

    def result(self) -> SplitSources:
        self._helpers_for_host()
        self.cuda.append(self.source[self.position :])
        launchers = []
        for name in self.launched:
            params, names = self.kernels[name]
            call = f"{name}<<<grid, block, shared, stream>>>({', '.join(names)});"
            launchers.append(f"{_launcher_signature(name, params)} {{ {call} }}")
        cuda = "\n".join([CUDA_PRELUDE, "".join(self.cuda), *launchers])
        host = "\n".join([HOST_PRELUDE, *self.includes, *self.host, ""])
        return SplitSources(cuda=cuda, host=host, launched=self.launched)


def split_source(cuda_source: str) -> SplitSources | None:
    """Split a load_inline CUDA source into a torch-free CUDA part and a torch host part (None: cannot)."""
    code = _mask(cuda_source)
    try:
        items = _Scanner(code).items_or_raise()
        halves = _Halves(cuda_source, code, _kernels(items))
        for item in items:
            halves.add(item)
        return halves.result() if halves.launched else None
    except _Unfollowable:
        return None
