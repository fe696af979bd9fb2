"""Keep the torch headers out of nvcc's translation unit of a load_inline extension.

torch's load_inline compiles the user's CUDA source, which includes
`torch/extension.h`, with nvcc: about 60 s, nearly all of it the torch headers
(the kernel alone compiles in under a second). This module splits that source
in two, without changing a line of what the user wrote:

- the CUDA part (kernels, device code, macros, plain declarations) stays in
  `cuda.cu`, line for line where it was, with the torch includes and the
  torch host functions blanked out, plus one small launcher per kernel the host
  code launches (`k<<<g, b, s, st>>>(...)` wrapped in a plain function);
- the torch host functions go to `main.cpp`, which g++ compiles with a
  precompiled `torch/extension.h`, their launches rewritten as calls to those
  launchers.

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
_TYPE_DECL = re.compile(r"^\s*(?:typedef|using|struct|class|union|enum|static_assert)\b|\bconstexpr\b|\bconst\b")
_LAUNCH = re.compile(r"\b([A-Za-z_]\w*)\s*(<[^<>()]*>)?\s*<<<")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_ATTRIBUTES = re.compile(r"__launch_bounds__\s*\([^)]*\)|__cluster_dims__\s*\([^)]*\)|\[\[[^\]]*\]\]")


@dataclass
class _Item:
    """One top-level piece of the source: a preprocessor line, a function, or a declaration."""

    start: int
    end: int
    kind: str  # "pp", "function", "declaration"
    head: str = ""  # for functions: the text before the body's brace

    def text(self, source: str) -> str:
        return source[self.start : self.end]


@dataclass
class SplitSources:
    """The two halves of a split load_inline source."""

    cuda: str
    host: str
    launched: list[str] = field(default_factory=list)


def _skip_literal(source: str, i: int) -> int:
    """Index after the comment or string literal starting at i (i itself when none starts there)."""
    two = source[i : i + 2]
    if two == "//":
        end = source.find("\n", i)
        return len(source) if end < 0 else end
    if two == "/*":
        end = source.find("*/", i + 2)
        return len(source) if end < 0 else end + 2
    if source[i] in "\"'":
        quote, j = source[i], i + 1
        while j < len(source) and source[j] != quote:
            j += 2 if source[j] == "\\" else 1
        return j + 1
    return i


def _scan(source: str) -> list[_Item] | None:
    """Split the source into top-level items; None if it is not shaped as this scanner expects."""
    items: list[_Item] = []
    i, start, depth, head_end = 0, 0, 0, -1
    at_line_start = True
    while i < len(source):
        c = source[i]
        skipped = _skip_literal(source, i)
        if skipped != i:
            i = skipped
            continue
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if c.isspace():
            i += 1
            continue
        if c == "#" and at_line_start and depth == 0:
            if source[start:i].strip():
                return None  # a directive in the middle of a declaration
            end = i
            while True:
                end = source.find("\n", end)
                if end < 0 or source[end - 1] != "\\":
                    break
                end += 1
            end = len(source) if end < 0 else end
            items.append(_Item(i, end, "pp"))
            i = start = end
            continue
        at_line_start = False
        if c == "{":
            if depth == 0:
                head_end = i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0:
                head = source[start:head_end]
                following = source[i + 1 :].lstrip(" \t")
                if following.startswith(";") or (not head.rstrip().endswith(")") and ")" not in head):
                    # struct/class/enum/namespace/initializer: a declaration, up to its semicolon
                    semicolon = source.find(";", i)
                    if semicolon < 0 or re.match(r"\s*(?:namespace|extern)\b", head):
                        return None
                    items.append(_Item(start, semicolon + 1, "declaration"))
                    i = start = semicolon + 1
                    continue
                items.append(_Item(start, i + 1, "function", head=head))
                start = i + 1
        elif c == ";" and depth == 0:
            items.append(_Item(start, i + 1, "declaration"))
            start = i + 1
        i += 1
    if depth != 0 or source[start:].strip():
        return None
    return items


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


def _kernel_name(head: str) -> str | None:
    names = _IDENT.findall(head[: head.find("(")])
    return names[-1] if names else None


def _rewrite_launches(body: str, kernels: set[str]) -> tuple[str, list[str]] | None:
    """Replace each `k<<<cfg>>>(args)` with `__profsvc_launch_k(cfg, 0.., args)`; None if one is not plain."""
    out, launched, position = [], [], 0
    for match in _LAUNCH.finditer(body):
        name, template_args = match.group(1), match.group(2)
        if template_args or name not in kernels:
            return None
        config_end = body.find(">>>", match.end())
        if config_end < 0:
            return None
        config = _split_top(body[match.end() : config_end])
        paren = body.find("(", config_end + 3)
        if not 2 <= len(config) <= 4 or paren < 0 or body[config_end + 3 : paren].strip():
            return None
        config += ["0"] * (4 - len(config))
        separator = "" if body[paren + 1 :].lstrip().startswith(")") else ", "
        out.append(body[position : match.start()])
        out.append(f"{LAUNCHER_PREFIX}{name}({', '.join(c.strip() for c in config)}{separator}")
        position = paren + 1
        launched.append(name)
    out.append(body[position:])
    return "".join(out), launched


def _blank(text: str) -> str:
    """As many newlines as the text spans: keeps every later line where it was."""
    return "\n" * text.count("\n")


def split_source(cuda_source: str) -> SplitSources | None:
    """Split a load_inline CUDA source into a torch-free CUDA part and a torch host part (None: cannot)."""
    items = _scan(cuda_source)
    if items is None:
        return None
    kernels: dict[str, tuple[str, list[str]]] = {}
    for item in items:
        if item.kind == "function" and "__global__" in item.head:
            if re.search(r"\btemplate\b", item.head):
                continue
            head = _ATTRIBUTES.sub(" ", item.head)
            name, params = _kernel_name(head), _kernel_params(head)
            if name is None:
                return None
            if params is not None:
                kernels[name] = params
    cuda_parts: list[str] = []
    host_parts: list[str] = []
    launched: list[str] = []
    position = 0
    for item in items:
        text = item.text(cuda_source)
        gap = cuda_source[position : item.start]
        position = item.end
        cuda_parts.append(gap)
        torch_side = bool(_TORCH.search(text))
        if item.kind == "pp":
            if _CONDITIONAL.match(text):
                return None
            if _TORCH_INCLUDE.match(text):
                cuda_parts.append(_blank(text))
                host_parts.append(text)
            elif torch_side:
                cuda_parts.append(_blank(text))
                host_parts.append(text)
            else:
                cuda_parts.append(text)
                host_parts.append(text)
            continue
        if item.kind == "function":
            device_side = re.search(r"\b(?:__global__|__device__)\b", item.head)
            if device_side or not torch_side:
                if "<<<" in text and not device_side:
                    return None  # a plain host launcher: the host part would need its declaration
                cuda_parts.append(text)
                continue
            rewritten = _rewrite_launches(text, set(kernels))
            if rewritten is None:
                return None
            body, names = rewritten
            launched += [n for n in names if n not in launched]
            cuda_parts.append(_blank(text))
            host_parts.append(body)
            continue
        if _DEVICE_STORAGE.search(text) or "__global__" in text:
            cuda_parts.append(text)
        elif torch_side:
            cuda_parts.append(_blank(text))
            host_parts.append(text)
        elif _TYPE_DECL.search(text) or "(" in text:
            # Types, constants and prototypes: both halves may need them.
            cuda_parts.append(text)
            host_parts.append(text)
        else:
            return None  # a global variable: one definition cannot live in both halves
    cuda_parts.append(cuda_source[position:])
    if not launched:
        return None
    launchers = []
    declarations = []
    for name in launched:
        params, names = kernels[name]
        extra = f", {params}" if params and params != "void" else ""
        signature = f"void {LAUNCHER_PREFIX}{name}(dim3 grid, dim3 block, size_t shared, cudaStream_t stream{extra})"
        launchers.append(f"{signature} {{ {name}<<<grid, block, shared, stream>>>({', '.join(names)}); }}")
        declarations.append(f"{signature};")
    cuda = "\n".join([CUDA_PRELUDE, "".join(cuda_parts), *launchers])
    includes = [p for p in host_parts if _TORCH_INCLUDE.match(p)]
    rest = [p for p in host_parts if not _TORCH_INCLUDE.match(p)]
    # The launchers' declarations go after the macros and types their parameters may use, before the functions.
    first_function = next((i for i, p in enumerate(rest) if p.lstrip()[:1] != "#" and "{" in p), len(rest))
    host = "\n".join([HOST_PRELUDE, *includes, *rest[:first_function], *declarations, *rest[first_function:], ""])
    return SplitSources(cuda=cuda, host=host, launched=launched)
