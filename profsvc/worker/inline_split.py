"""Keep the torch headers out of nvcc's translation unit of a load_inline extension.

torch's load_inline compiles the user's CUDA source, which includes
`torch/extension.h`, with nvcc: about 60 s, nearly all of it the torch headers
(the kernel alone compiles in under a second). This module splits that source
in two, without changing a line of what the user wrote:

- the CUDA part (kernels, device code, macros, plain declarations, plain host
  helpers and launchers) stays in `cuda.cu`, line for line where it was, with
  the torch includes and the torch host functions blanked out, plus one small
  launcher per kernel (or kernel instantiation) the torch code launches
  (`k<<<g, b, s, st>>>(...)` wrapped in a plain function) and one address
  function per kernel it names otherwise (`cudaFuncSetAttribute(k, ...)`);
- the torch host functions go to `main.cpp`, which g++ compiles with a
  precompiled `torch/extension.h`, their launches rewritten as calls to those
  launchers; plain host helpers and launchers they call are copied there
  (static, inline, constexpr or templated ones) or declared there (the others);
  host globals, namespaces and device-type declarations go where they are used.

It declines (`Declined`, with the reason and the line) whenever the source does
something this scanner does not follow safely (code under top-level conditional
compilation, a launch with template arguments only the host code knows, device
code that names torch, host code only nvcc compiles): the caller then builds the
source as torch would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

LAUNCHER_PREFIX = "__profsvc_launch_"
ADDRESS_PREFIX = "__profsvc_kernel_"
# The three lines cuda.cu starts with, as many as torch's implicit headers (hotspot line mapping relies on it).
CUDA_PRELUDE = "#include <cuda.h>\n#include <cuda_runtime.h>\n#include <cstddef>"
HOST_PRELUDE = "#include <torch/extension.h>\n#include <cuda_runtime.h>"

_TORCH = re.compile(r"\b(?:torch|at|c10|pybind11|py)::|\bTORCH_|\bAT_[A-Z_]+\b|\bTensor\b|\bC10_|\bPYBIND11")
_TORCH_INCLUDE = re.compile(r"#\s*include\s*[<\"](?:torch|ATen|c10|pybind11|Python)[/.]")
# Headers only device code needs, some of which g++ cannot read (mma.h's types, cooperative groups): nvcc's unit only.
_DEVICE_INCLUDE = re.compile(
    r"#\s*include\s*[<\"](?:mma\.h|cooperative_groups\b|cub/|thrust/|cuda/|cuda_pipeline|cuda_awbarrier|crt/"
    r"|sm_\d+_|[^<>\"]*\.cuh[>\"])"
)
# `using namespace nvcuda;`, `namespace cg = cooperative_groups;`: names only device code uses.
_DEVICE_NAMESPACE = re.compile(
    r"^\s*(?:using\s+namespace|namespace\s+\w+\s*=)\s*(?:::\s*)?(?:nvcuda|cooperative_groups|cub|thrust|cuda|wmma)\b"
)
_TORCH_NAMESPACE = re.compile(r"^\s*(?:using\s+namespace|namespace\s+\w+\s*=)\s*(?:::\s*)?(?:torch|at|c10|pybind11)\b")
# Host code that only nvcc compiles: thrust and cub algorithms (they instantiate kernels), extended device lambdas.
_NVCC_ONLY_HOST = re.compile(r"\b(?:thrust|cub)::|\b__device__\b|\b__global__\b")
_CONDITIONAL_OPEN = re.compile(r"#\s*(?:if|ifdef|ifndef)\b")
_CONDITIONAL_CLOSE = re.compile(r"#\s*endif\b")
_CONDITIONAL = re.compile(r"#\s*(?:if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b")
_DEFINE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)")
_DEVICE_STORAGE = re.compile(r"\b(?:__device__|__constant__|__shared__|__managed__|__global__)\b")
_DEVICE_FUNCTION = re.compile(r"\b(?:__global__|__device__)\b")
_TYPE_DECL = re.compile(
    r"^\s*(?:typedef|using|struct|class|union|enum|static_assert|template)\b|\bconstexpr\b|\bconst\b"
)
_TYPE_DEFINITION = re.compile(r"^\s*(?:template\s*<.*>\s*)?(?:struct|class|union|enum)\b", re.DOTALL)
_TEMPLATE = re.compile(r"\btemplate\b")
# A host helper whose copy in the glue unit is the same function: internal linkage or inline by definition.
_COPYABLE = re.compile(r"\b(?:static|inline|__forceinline__|__inline__|constexpr|template)\b")
_INTERNAL_LINKAGE_WORD = re.compile(r"\b(?:static|inline|__inline__|__forceinline__)\b")
_SCOPE = re.compile(r"\s*(?:inline\s+)?(?:namespace|extern)\b")
_LAUNCH = re.compile(r"\b([A-Za-z_]\w*)\s*(<[^<>()]*>)?\s*<<<")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_ATTRIBUTES = re.compile(r"__launch_bounds__\s*\([^)]*\)|__cluster_dims__\s*\([^)]*\)|\[\[[^\]]*\]\]")
# What shapes the top level: a directive's `#` first on its line, braces and semicolons.
_STRUCTURE = re.compile(r"^[ \t]*#|[{};]", re.MULTILINE)
_SEMICOLON_NEXT = re.compile(r"[ \t]*;")
_NO_ARGUMENTS = re.compile(r"\s*\)")
_RAW_PREFIXES = ("R", "LR", "uR", "UR", "u8R")
_LITERAL_START = re.compile(r"//|/\*|['\"]")
# Template arguments nvcc's unit can read by themselves: numbers, and the names of builtin and CUDA types.
_BUILTIN_TYPE = re.compile(
    r"(?:void|bool|char|short|int|long|signed|unsigned|float|double|true|false|sizeof|const|volatile"
    r"|u?int(?:8|16|32|64)_t|size_t|ptrdiff_t|half|__half2?|__nv_bfloat162?|nv_bfloat162?|__nv_fp8_\w+"
    r"|(?:u?char|u?short|u?int|u?long|u?longlong|float|double)[1-4])"
)
_NUMBER = re.compile(r"[0-9][\w.']*")
# torch's type dispatch (AT_DISPATCH_*(type, "name", [&] { k<scalar_t><<<...>>>(...); })): the C++ types each
# macro instantiates its lambda for, spelled as nvcc's unit knows them. Macros over torch's own types (Half,
# BFloat16, complex) are not here: the kernel unit has no torch headers to instantiate the kernel with them.
DISPATCH_TYPES = {
    "AT_DISPATCH_FLOATING_TYPES": ("double", "float"),
    "AT_DISPATCH_INTEGRAL_TYPES": ("uint8_t", "int8_t", "int16_t", "int", "int64_t"),
    "AT_DISPATCH_ALL_TYPES": ("uint8_t", "int8_t", "int16_t", "int", "int64_t", "float", "double"),
}
_DISPATCH = re.compile(r"\b(AT_DISPATCH_\w+)\s*\(")
DISPATCH_TYPE = "scalar_t"


class _Unfollowable(Exception):
    """The source does something the split cannot follow safely; `at` is where (an offset), -1 when nowhere."""

    def __init__(self, message: str, at: int = -1) -> None:
        super().__init__(message)
        self.at = at


@dataclass(frozen=True)
class Declined:
    """Why a source was not split: the reason, and the line of the source it points at (1-based, 0: none)."""

    reason: str
    line: int = 0

    def text(self, first_line: int = 0) -> str:
        """The reason with its line, in the user's file where the source's first line there is known."""
        if not self.line:
            return self.reason
        where = f"line {self.line + first_line - 1}" if first_line else f"line {self.line} of cuda_sources"
        return f"{self.reason} ({where})"


@dataclass
class _Item:
    """One top-level piece of the source: a preprocessor line, a function, a declaration or a namespace block."""

    start: int
    end: int
    kind: str  # "pp", "function", "declaration", "scope"
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


def mask(source: str, *, literals: bool = True) -> str:
    """The source with comments and literals (or, literals=False, comments only) turned into spaces.

    Same length, newlines kept. Every structural question (braces, `<<<`, torch names) is asked of this
    text, so a brace or `<<<` in a comment or string cannot mislead the scanner.
    """
    out, i, copied = [], 0, 0
    while match := _LITERAL_START.search(source, i):
        i = match.start()
        end = _literal_end(source, i)
        if end == i or not (literals or source.startswith(("//", "/*"), i)):
            i = max(end, i + 1)
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

    def __init__(self, code: str, start: int = 0, end: int | None = None) -> None:
        self.code = code
        self.end = len(code) if end is None else end
        self.items: list[_Item] = []
        self.start = start  # where the item being read began
        self.depth = 0
        self.head_end = 0  # the brace that opened the current top-level body

    def items_or_raise(self) -> list[_Item]:
        """The items, in order; raises _Unfollowable when the source is not shaped as expected."""
        position = self.start
        while (match := _STRUCTURE.search(self.code, position, self.end)) is not None:
            position = self._step(match.end() - 1)
        if self.depth:
            raise _Unfollowable("unbalanced braces", self.head_end)
        if self.code[self.start : self.end].strip():
            raise _Unfollowable("an unterminated declaration", self.start + self._indent(self.start))
        return self.items

    def _indent(self, at: int) -> int:
        text = self.code[at : self.end]
        return len(text) - len(text.lstrip())

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
            raise _Unfollowable("a directive in the middle of a declaration", at)
        self.start = at
        self._add(min(_directive_end(self.code, at), self.end), "pp")
        return self.start

    def _close(self, at: int) -> int:
        self.depth -= 1
        if self.depth < 0:
            raise _Unfollowable("unbalanced }", at)
        if self.depth:
            return at + 1
        head = self.code[self.start : self.head_end]
        if _SCOPE.match(head) and "(" not in head:
            # namespace NAME { ... } or extern "C" { ... }: one item, placed as a whole
            after = _SEMICOLON_NEXT.match(self.code, at + 1)
            self._add(after.end() if after else at + 1, "scope", head)
        elif _SEMICOLON_NEXT.match(self.code, at + 1) or ")" not in head:
            # struct/class/enum/initializer: a declaration, up to its semicolon
            semicolon = self.code.find(";", at, self.end)
            if semicolon < 0:
                raise _Unfollowable("an unterminated declaration", self.head_end)
            self._add(semicolon + 1, "declaration")
        else:
            self._add(at + 1, "function", head)
        return self.start


def split_top(text: str) -> list[str]:
    """Split at top-level commas (outside (), [], {} and <>)."""
    parts, depth, current = [], 0, []
    for c in text:
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def _template_split(head: str) -> tuple[list[tuple[str, bool]] | None, str]:
    """(template parameters as (name, has a default), the head after them); None for a head without template."""
    match = _TEMPLATE.search(head)
    if match is None:
        return None, head
    open_angle = head.find("<", match.end())
    depth, i = 0, open_angle
    while i < len(head):
        depth += {"<": 1, ">": -1}.get(head[i], 0)
        if depth == 0:
            break
        i += 1
    if open_angle < 0 or i >= len(head):
        raise _Unfollowable("a template head it cannot read")
    parameters = []
    for parameter in split_top(head[open_angle + 1 : i]):
        if "..." in parameter:
            raise _Unfollowable("a variadic template kernel")
        declarator, _, default = parameter.partition("=")
        names = _IDENT.findall(declarator)
        if not names:
            raise _Unfollowable("an unnamed template parameter")
        parameters.append((names[-1], bool(default.strip())))
    return parameters, head[i + 1 :]


def _kernel_params(head: str) -> tuple[str, list[str]] | None:
    """A __global__ function head's parameter list and parameter names (None when a name is missing)."""
    open_paren = head.find("(")
    close_paren = head.rfind(")")
    if open_paren < 0 or close_paren < open_paren:
        return None
    params = head[open_paren + 1 : close_paren]
    names = []
    for param in split_top(params):
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


@dataclass
class _Kernel:
    """A __global__ function defined at top level."""

    params: str
    names: list[str]
    template: list[tuple[str, bool]] | None  # template parameters (name, has a default); None: no template


def _kernels(items: list[_Item]) -> tuple[dict[str, _Kernel], set[str]]:
    """The launchable kernels by name, and every kernel name (those with unnamed parameters too)."""
    kernels, every = {}, set()
    for item in items:
        if item.kind != "function" or "__global__" not in item.head:
            continue
        try:
            template, rest = _template_split(_ATTRIBUTES.sub(" ", item.head))
        except _Unfollowable as error:
            raise _Unfollowable(str(error), item.start) from None
        name = _function_name(rest)
        every.add(name)
        params = _kernel_params(rest)
        if params is not None:
            kernels[name] = _Kernel(params[0], params[1], template)
    return kernels, every


def _top_names(items: list[_Item], code: str) -> set[str]:
    """Names the top level defines or declares (macros, types, constants), which template arguments may use."""
    names = set()
    for item in items:
        text = code[item.start : item.end]
        if item.kind == "pp":
            if match := _DEFINE.match(text.strip()):
                names.add(match.group(1))
        elif item.kind == "declaration":
            names.update(_IDENT.findall(text))
    return names


def _declared_names(code: str, start: int, end: int) -> set[str]:
    """The names a block of top-level items declares: functions, types, variables, macros."""
    names = set()
    for item in _Scanner(code, start, end).items_or_raise():
        text = code[item.start : item.end]
        if item.kind == "pp":
            if match := _DEFINE.match(text.strip()):
                names.add(match.group(1))
        elif item.kind == "function":
            names.add(_function_name(_template_split(_ATTRIBUTES.sub(" ", item.head))[1]))
        elif item.kind == "scope":
            open_brace = code.index("{", item.start)
            names.update(_declared_names(code, open_brace + 1, code.rindex("}", item.start, item.end)))
            names.update(_IDENT.findall(item.head)[1:])  # the namespace's own name
        else:
            names.update(_IDENT.findall(re.split(r"[=(\[{;]", text, maxsplit=1)[0])[-1:])
            if type_name := re.match(r"\s*(?:template\s*<.*?>\s*)?(?:struct|class|union|enum)\s+(\w+)", text):
                names.add(type_name.group(1))
    return names


class _Launchers:
    """The launchers (one per kernel, or per distinct instantiation of a templated kernel) the host code calls."""

    def __init__(self, kernels: dict[str, _Kernel], visible: set[str]) -> None:
        self.kernels = kernels
        self.visible = visible  # names nvcc's unit defines at top level
        self.by_key: dict[tuple[str, str], str] = {}  # (kernel, template arguments) -> launcher name
        self.dispatched: dict[tuple[str, str], tuple[str, ...]] = {}  # launches on scalar_t -> its types
        self.params: dict[str, str] = {}  # launcher name -> ", " + the kernel's parameters as instantiated
        self.signatures: dict[str, str] = {}  # launcher name -> signature
        self.calls: dict[str, str] = {}  # launcher name -> the launch it makes
        self.launched: list[str] = []

    def launcher(self, name: str, template_args: str | None, at: int, dispatch: str = "") -> tuple[str, bool]:
        """The launcher of `name<template_args>`, made on first use, and whether it is a template on scalar_t.

        `dispatch`: the AT_DISPATCH_* macro whose lambda holds the launch ("" for none).
        """
        kernel = self.kernels.get(name)
        if kernel is None:
            raise _Unfollowable(f"launch of {name}: not a kernel defined at top level with named parameters", at)
        args = split_top(template_args[1:-1]) if template_args else []
        key = (name, ",".join(a.strip() for a in args))
        if key in self.by_key:
            return self.by_key[key], key in self.dispatched
        params = kernel.params
        if kernel.template is not None:
            if not args or len(args) > len(kernel.template) or any(not d for _, d in kernel.template[len(args) :]):
                raise _Unfollowable(f"launch of {name}: template arguments deduced or left to defaults", at)
            hidden = {
                n
                for n in _IDENT.findall(" ".join(args))
                if not _BUILTIN_TYPE.fullmatch(n) and not _NUMBER.fullmatch(n) and n not in self.visible
            }
            if hidden == {DISPATCH_TYPE} and dispatch not in DISPATCH_TYPES:
                what = f"{dispatch} covers torch's own types" if dispatch else "scalar_t outside AT_DISPATCH"
                raise _Unfollowable(f"launch of {name}<scalar_t>: {what}", at)
            if hidden - {DISPATCH_TYPE}:
                names = ", ".join(sorted(hidden))
                raise _Unfollowable(f"launch of {name}: template arguments from the host code ({names})", at)
            values = {parameter: arg.strip() for (parameter, _), arg in zip(kernel.template, args, strict=False)}
            params = _IDENT.sub(lambda m: values.get(m.group(0), m.group(0)), params)
            if hidden:
                self.dispatched[key] = DISPATCH_TYPES[dispatch]
        elif args:
            raise _Unfollowable(f"launch of {name}: template arguments for a kernel that is no template", at)
        launcher = LAUNCHER_PREFIX + name + (f"_{sum(k[0] == name for k in self.by_key)}" if args else "")
        self.by_key[key] = launcher
        extra = f", {params}" if params and params != "void" else ""
        self.params[launcher] = extra
        template = f"template <typename {DISPATCH_TYPE}> " if key in self.dispatched else ""
        self.signatures[launcher] = (
            f"{template}void {launcher}(dim3 grid, dim3 block, size_t shared, cudaStream_t stream{extra})"
        )
        target = f"{name}<{key[1]}>" if args else name
        self.calls[launcher] = f"{target}<<<grid, block, shared, stream>>>({', '.join(kernel.names)});"
        if name not in self.launched:
            self.launched.append(name)
        return launcher, key in self.dispatched

    def definitions(self) -> list[str]:
        """The launchers' definitions, and the instantiations of the templated ones for their dispatch's types."""
        lines = [f"{self.signatures[launcher]} {{ {self.calls[launcher]} }}" for launcher in self.signatures]
        for key, types in self.dispatched.items():
            launcher = self.by_key[key]
            for type_name in types:
                params = re.sub(rf"\b{DISPATCH_TYPE}\b", type_name, self.params[launcher])
                lines.append(f"template void {launcher}<{type_name}>(dim3, dim3, size_t, cudaStream_t{params});")
        return lines


def _dispatch_at(code: str, at: int) -> str:
    """The AT_DISPATCH_* macro whose call holds position `at` of code, "" for none."""
    found = ""
    for match in _DISPATCH.finditer(code, 0, at):
        depth, i = 0, match.end() - 1
        while i < len(code):
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            if depth == 0:
                break
            i += 1
        if i > at:
            found = match.group(1)
    return found


def _rewrite_launches(text: str, code: str, launchers: _Launchers, offset: int) -> tuple[str, list[str]]:
    """Replace each `k<<<cfg>>>(args)` with `__profsvc_launch_k(cfg, 0.., args)` (code: text masked).

    Returns the text and the launchers it calls. `offset`: where the text starts in the source.
    """
    out, used, position, count = [], [], 0, 0
    for match in _LAUNCH.finditer(code):
        name, template_args = match.group(1), match.group(2)
        at = offset + match.start()
        config_end = code.find(">>>", match.end())
        if config_end < 0:
            raise _Unfollowable(f"launch of {name}: no `>>>`", at)
        paren = code.find("(", config_end + 3)
        config = split_top(code[match.end() : config_end])
        if paren < 0 or code[config_end + 3 : paren].strip() or not 2 <= len(config) <= 4:
            raise _Unfollowable(f"launch of {name}: not a plain `<<<cfg>>>(args)`", at)
        launcher, templated = launchers.launcher(name, template_args, at, _dispatch_at(code, match.start()))
        config = [text[s:e].strip() for s, e in _top_spans(code, match.end(), config_end)]
        config += ["0"] * (4 - len(config))
        separator = "" if _NO_ARGUMENTS.match(code, paren + 1) else ", "
        call = f"{launcher}<{DISPATCH_TYPE}>" if templated else launcher
        out += [text[position : match.start()], f"{call}({', '.join(config)}", separator]
        position = paren + 1
        used.append(launcher)
        count += 1
    if code.count("<<<") != count:
        raise _Unfollowable("a launch of something other than a plain kernel name", offset + code.find("<<<"))
    out.append(text[position:])
    return "".join(out), used


def _top_spans(code: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of the comma-separated parts of code[start:end] at its top level (outside brackets)."""
    spans, depth, part = [], 0, start
    for i in range(start, end):
        c = code[i]
        depth += 1 if c in "([{<" else -1 if c in ")]}>" else 0
        if c == "," and depth == 0:
            spans.append((part, i))
            part = i + 1
    spans.append((part, end))
    return [(s, e) for s, e in spans if code[s:e].strip()]


def _qualified(code: str, at: int) -> bool:
    """Whether the name at `at` follows `.`, `->` or `::`: a member or a qualified name, not a top-level one."""
    return code[:at].rstrip().endswith((".", "->", "::"))


def _blank(text: str) -> str:
    """As many newlines as the text spans: keeps every later line where it was."""
    return "\n" * text.count("\n")


def _is_variable(code: str) -> bool:
    """Whether a plain (non-type, non-const) declaration defines a variable rather than declaring a function."""
    before_params = code.split("(", 1)[0]
    return "(" not in code or ("=" in before_params and "operator" not in before_params)


def _variable_name(code: str) -> str:
    names = _IDENT.findall(re.split(r"[=(\[{;]", code, maxsplit=1)[0])
    if not names:
        raise _Unfollowable("a declaration without a name")
    return names[-1]


@dataclass
class _Piece:
    """One top-level item and where it goes; some places are settled only once the whole source is read.

    place: "cuda", "host", "both", or to settle: "variable" (a host global), "scope" (a namespace block),
    "device_type" (a type with device members), "device_variable" (a __device__, __constant__ or __managed__
    global), "helper" (a plain or __host__ __device__ function).
    """

    text: str
    code: str
    start: int
    place: str
    host_text: str | None = None  # what the host part gets, where not the text itself
    head: str = ""
    names: set[str] = field(default_factory=set)  # what the item declares (for the places settled late)
    declare: list[str] = field(default_factory=list)  # declarations the host part needs right before it


class _Halves:
    """Sends each top-level item to the CUDA part, the host part, or both."""

    def __init__(self, source: str, code: str, items: list[_Item]) -> None:
        self.source = source
        self.code = code
        self.kernels, self.kernel_names = _kernels(items)
        self.launchers = _Launchers(self.kernels, _top_names(items, code))
        self.pieces: list[_Piece] = []
        self.gaps: list[str] = []  # what lies before each piece (whitespace, comments): kept in the CUDA part
        self.includes: list[str] = []
        self.declared: set[str] = set()  # launchers and address functions the host part has declared
        self.addressed: list[str] = []  # kernels whose address the host code takes
        self.host_macros: dict[str, int] = {}  # macros defined in the host part only -> where
        self.conditional_depth = 0
        self.position = 0

    def add(self, item: _Item) -> None:
        self.gaps.append(self.source[self.position : item.start])
        self.position = item.end
        text, code = self.source[item.start : item.end], self.code[item.start : item.end]
        if item.kind == "pp":
            piece = self._directive(text, code, item.start)
        elif item.kind == "function":
            piece = self._function(text, code, item)
        elif item.kind == "scope":
            piece = _Piece(text, code, item.start, "scope", head=item.head)
            open_brace = self.code.index("{", item.start)
            piece.names = _declared_names(self.code, open_brace + 1, self.code.rindex("}", item.start, item.end))
        else:
            piece = self._declaration(text, code, item.start)
        if self.conditional_depth and item.kind != "pp" and piece.place not in ("cuda", "both"):
            # Device code and plain declarations keep their #if in both halves; host code could not.
            raise _Unfollowable("host code under top-level conditional compilation", item.start + _lead(code))
        self.pieces.append(piece)

    def _directive(self, text: str, code: str, start: int) -> _Piece:
        if _CONDITIONAL_OPEN.match(code.lstrip()):
            self.conditional_depth += 1
        elif _CONDITIONAL_CLOSE.match(code.lstrip()):
            self.conditional_depth -= 1
        if "<<<" in code:
            raise _Unfollowable("a kernel launch inside a macro", start)
        torch_include = _TORCH_INCLUDE.match(text.lstrip())
        torch = torch_include or _TORCH.search(code)
        if torch and (self.conditional_depth or _CONDITIONAL.match(code.lstrip())):
            raise _Unfollowable("torch under top-level conditional compilation", start)
        if torch_include:
            self.includes.append(text)
            return _Piece(text, code, start, "host", host_text="")
        if _DEVICE_INCLUDE.match(text.lstrip()):
            return _Piece(text, code, start, "cuda")
        if _TORCH.search(code):
            if match := _DEFINE.match(code.lstrip()):
                self.host_macros[match.group(1)] = start
            return _Piece(text, code, start, "host")
        return _Piece(text, code, start, "both")

    def _function(self, text: str, code: str, item: _Item) -> _Piece:
        head = item.head
        device_side = _DEVICE_FUNCTION.search(head)
        torch = _TORCH.search(code)
        if device_side and torch:
            raise _Unfollowable(f"device code names torch ({torch.group(0).rstrip(':')})", item.start + torch.start())
        if device_side and ("__global__" in head or "__host__" not in head):
            return _Piece(text, code, item.start, "cuda")
        if device_side or not torch:
            # A plain host helper or launcher, or a __host__ __device__ one: the CUDA part has it; the host part
            # gets a copy or its declaration if the torch code calls it (settled in result()).
            return _Piece(text, code, item.start, "helper", head=head)
        if nvcc_only := _NVCC_ONLY_HOST.search(code):
            reason = f"host code uses {nvcc_only.group(0).strip(':')}, which only nvcc compiles"
            raise _Unfollowable(reason, item.start + nvcc_only.start())
        body, used = _rewrite_launches(text, code, self.launchers, item.start)
        body, addressed = self._kernel_addresses(body, item.start)
        piece = _Piece(text, code, item.start, "host", host_text=body)
        # Declared right before their first caller: after every type and macro their parameters can use.
        for launcher in used:
            if launcher not in self.declared:
                self.declared.add(launcher)
                piece.declare.append(self.launchers.signatures[launcher] + ";")
        for kernel in addressed:
            if kernel not in self.addressed:
                self.addressed.append(kernel)
                piece.declare.append(f"const void* {ADDRESS_PREFIX}{kernel}();")
        return piece

    def _kernel_addresses(self, body: str, offset: int) -> tuple[str, list[str]]:
        """Replace the kernels the host code names (not launches: `cudaFuncSetAttribute(k, ...)`) by address calls."""
        code, out, position, addressed = mask(body), [], 0, []
        for match in re.finditer(r"(&\s*)?\b([A-Za-z_]\w*)\b", code):
            name = match.group(2)
            if name not in self.kernel_names or _qualified(code, match.start()):
                continue
            kernel = self.kernels.get(name)
            if code[match.end() :].lstrip().startswith("<") or (kernel is not None and kernel.template is not None):
                raise _Unfollowable(f"host code names the templated kernel {name}", offset)
            out += [body[position : match.start()], f"{ADDRESS_PREFIX}{name}()"]
            position = match.end()
            addressed.append(name)
        out.append(body[position:])
        return "".join(out), addressed

    def _declaration(self, text: str, code: str, start: int) -> _Piece:
        if _DEVICE_NAMESPACE.match(code):
            return _Piece(text, code, start, "cuda")
        if _TORCH_NAMESPACE.match(code):
            return _Piece(text, code, start, "host")
        if _DEVICE_STORAGE.search(code):
            if _TYPE_DEFINITION.match(code):
                return _Piece(text, code, start, "device_type", names=_declared_names(code, 0, len(code)))
            if _is_variable(code) and not _TEMPLATE.match(code):
                try:
                    return _Piece(text, code, start, "device_variable", names={_variable_name(code)})
                except _Unfollowable:
                    pass  # a name this scanner cannot read ([[attributes]] first): only device code can use it
            return _Piece(text, code, start, "cuda")
        if _TORCH.search(code):
            return _Piece(text, code, start, "host")
        if re.match(r"\s*namespace\b", code):
            return _Piece(text, code, start, "both")  # a namespace alias
        if _TYPE_DECL.search(code) or not _is_variable(code):
            # Types, constants and prototypes: both halves may need them.
            return _Piece(text, code, start, "both")
        return _Piece(text, code, start, "variable", names={_variable_name(code)})

    def _host_names(self) -> set[str]:
        """Identifiers the host part's own code uses (its torch code, the launchers' parameters, helpers it calls)."""
        names: set[str] = set()
        for piece in self.pieces:
            if piece.place == "host":
                names.update(_IDENT.findall(piece.code if piece.host_text is None else mask(piece.host_text)))
        for signature in self.launchers.signatures.values():
            names.update(_IDENT.findall(signature))
        helpers = [p for p in self.pieces if p.place == "helper"]
        reached: set[int] = set()
        while True:
            called = [
                i
                for i, p in enumerate(helpers)
                if i not in reached and _function_name(_template_split(p.head)[1]) in names
            ]
            if not called:
                return names
            for i in called:
                reached.add(i)
                if self._copyable(helpers[i]):
                    names.update(_IDENT.findall(helpers[i].code))

    def _copyable(self, piece: _Piece) -> bool:
        """Whether a helper's copy in the host part is the same function: internal linkage or inline by
        definition, and naming no kernel (the host part has none)."""
        names_kernel = "<<<" in piece.code or set(_IDENT.findall(piece.code)) & self.kernel_names
        rest = _template_split(piece.head)[1]
        return bool(_COPYABLE.search(piece.head)) and not names_kernel and "::" not in rest[: rest.find("(")]

    def _settle(self, piece: _Piece, host_names: set[str], cuda_names: set[str]) -> tuple[str, str]:
        """(what the CUDA part gets, what the host part gets) for a piece."""
        place = piece.place
        if place == "variable":
            name = next(iter(piece.names))
            if name in host_names and name in cuda_names:
                raise _Unfollowable(f"the global variable {name} is used by host and CUDA code", piece.start)
            place = "host" if name in host_names else "cuda"
        elif place == "device_type":
            place = "both" if piece.names & host_names else "cuda"
        elif place == "device_variable":
            name = next(iter(piece.names))
            if name in host_names and self._host_code_names(name):
                # cudaMemcpyToSymbol(g, ...) needs the variable's host shadow, which only nvcc's unit has.
                raise _Unfollowable(f"host code names the device variable {name}", piece.start + _lead(piece.code))
            place = "cuda"
        elif place == "scope":
            place = self._scope_place(piece, host_names)
        elif place == "helper":
            return self._helper(piece, host_names)
        if place == "cuda":
            return piece.text, ""
        if place == "host":
            return _blank(piece.text), piece.text if piece.host_text is None else piece.host_text
        return piece.text, piece.text

    def _host_code_names(self, name: str) -> bool:
        """Whether the host part's own code names `name` itself (not a member or a qualified name of that name)."""
        pattern = re.compile(rf"\b{re.escape(name)}\b")
        return any(
            not _qualified(p.code, match.start())
            for p in self.pieces
            if p.place == "host"
            for match in pattern.finditer(p.code)
        )

    def _scope_place(self, piece: _Piece, host_names: set[str]) -> str:
        device = _DEVICE_STORAGE.search(piece.code) or "<<<" in piece.code
        torch = _TORCH.search(piece.code)
        if torch and device:
            raise _Unfollowable("a namespace holding both torch and CUDA code", piece.start + _lead(piece.code))
        if torch:
            return "host"
        if not piece.names & host_names:
            return "cuda"
        body = _Scanner(piece.code, piece.code.index("{") + 1, piece.code.rindex("}"))
        functions = [i for i in body.items_or_raise() if i.kind == "function"]
        if device or any(not _COPYABLE.search(f.head) for f in functions):
            raise _Unfollowable("host code uses a namespace that holds CUDA code", piece.start + _lead(piece.code))
        return "both"

    def _helper(self, piece: _Piece, host_names: set[str]) -> tuple[str, str]:
        """A host helper or launcher: kept in the CUDA part; copied or declared in the host part if called there."""
        # The user's head without its comments (a trailing `// ...` would swallow the declaration's semicolon).
        head_text = mask(piece.text[: len(piece.head)], literals=False)
        rest = _template_split(piece.head)[1]
        if _function_name(rest) not in host_names:
            return piece.text, ""
        at = piece.start + _lead(piece.code)
        if self._copyable(piece):
            return piece.text, piece.text
        if "::" in rest[: rest.find("(")] or re.search(r"\bextern\b", piece.head):
            raise _Unfollowable("a called host helper whose declaration could differ (member or extern)", at)
        if _TEMPLATE.search(piece.head) or re.search(r"\b(?:constexpr|auto)\b", rest[: rest.find("(")]):
            raise _Unfollowable("a templated or constexpr host launcher called from the torch code", at)
        if _INTERNAL_LINKAGE_WORD.search(piece.head):
            # static/inline dropped (blanked, lines kept) so that the host part can call the CUDA part's copy.
            cuda_head = _INTERNAL_LINKAGE_WORD.sub(lambda m: " " * len(m.group(0)), head_text)
            declaration = _INTERNAL_LINKAGE_WORD.sub("", head_text)
            return cuda_head + piece.text[len(head_text) :], declaration.strip() + ";"
        return piece.text, head_text.strip() + ";"

    def result(self) -> SplitSources:
        host_names = self._host_names()
        cuda_names: set[str] = set()
        for piece in self.pieces:
            if piece.place in ("cuda", "helper"):
                cuda_names.update(_IDENT.findall(piece.code))
        for macro, at in self.host_macros.items():
            if macro in cuda_names:
                raise _Unfollowable(f"the torch macro {macro} is used by CUDA code", at)
        cuda, host = [], []
        for gap, piece in zip(self.gaps, self.pieces, strict=True):
            cuda_text, host_text = self._settle(piece, host_names, cuda_names)
            cuda += [gap, cuda_text]
            host += [*piece.declare, host_text] if host_text or piece.declare else []
        cuda.append(self.source[self.position :])
        addresses = [f"const void* {ADDRESS_PREFIX}{k}() {{ return (const void*){k}; }}" for k in self.addressed]
        cuda_text = "\n".join([CUDA_PRELUDE, "".join(cuda), *self.launchers.definitions(), *addresses])
        host_text = "\n".join([HOST_PRELUDE, *self.includes, *(h for h in host if h), ""])
        return SplitSources(cuda=cuda_text, host=host_text, launched=self.launchers.launched)


def _lead(code: str) -> int:
    """Offset of the first non-blank character."""
    return len(code) - len(code.lstrip())


def _line(source: str, at: int) -> int:
    return source.count("\n", 0, at) + 1 if at >= 0 else 0


def split_source(cuda_source: str) -> SplitSources | Declined:
    """Split a load_inline CUDA source into a torch-free CUDA part and a torch host part, or say why not."""
    code = mask(cuda_source)
    try:
        items = _Scanner(code).items_or_raise()
        halves = _Halves(cuda_source, code, items)
        for item in items:
            halves.add(item)
        if halves.conditional_depth:
            raise _Unfollowable("an #if without its #endif")
        return halves.result()
    except _Unfollowable as error:
        return Declined(str(error), _line(cuda_source, error.at))
