"""A load_inline extension's Python binding as an object of its own, shared by every build with its signatures.

load_inline binds `functions` in the glue unit (`PYBIND11_MODULE` and one `m.def` each), and pybind11's
machinery is most of that unit's time: g++ compiles it again for every build, though an agent's next
candidate binds the same functions (only its module's name and code change). Here the binding is one
object per list of signatures, names left out: it calls each function through a pointer the host unit
defines, and the host unit forwards the module's `PyInit_<name>` to it, so one object serves every name.
The split-bind route (profsvc.build.routes) links it beside a host unit that reads torch's tensor headers
alone.

A plan holds only types spelled with the words of ALLOWED_WORDS: the object's source is made from the plan
by the trusted builder in a run without user flags or code, and the server installs it like a precompiled
header. Nothing here imports torch or builds anything.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from profsvc.worker.inline_split import split_top

BINDING_FOLDER = "binding"
# The object's module name: its PyInit_ is the one the host unit forwards to.
BINDING_MODULE = "profsvc_binding"
BINDING_OBJECT = "binding.o"
_PREFIX = "__profsvc_binding_"
_HIDDEN = '__attribute__((visibility("hidden")))'
# Bounds on what a plan may ask the server to compile (a module past them binds in its glue unit).
MAX_FUNCTIONS = 64
MAX_SIGNATURE = 400

# The words a bound signature may be spelled with: torch's tensor and scalar types and the standard containers
# pybind11 converts, each after its namespace (`torch::Tensor`, `std::vector`), as the binding unit, which has
# no `using` of the user's, reads them; and C++'s arithmetic types. A signature with any other word is bound
# in the glue unit.
NAMESPACES = frozenset({"torch", "at", "c10", "std"})
QUALIFIED_WORDS = frozenset(
    "Tensor optional vector string tuple Scalar ScalarType IntArrayRef Device Layout MemoryFormat Generator".split()
)
PLAIN_WORDS = frozenset(
    "int long short char signed unsigned bool float double void const "
    "int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t size_t".split()
)
ALLOWED_WORDS = NAMESPACES | QUALIFIED_WORDS | PLAIN_WORDS
_TOKEN = re.compile(r"\s*(::|&&|[A-Za-z_]\w*|[<>,&*()\[\]=;{}]|\S)")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# What may precede a function's result type in its declaration (dropped from the signature).
_SPECIFIERS = frozenset({"static", "inline", "extern", "TORCH_API", "C10_EXPORT", "__host__"})
# Code the binding cannot stand in for: pybind11 in the host code, a module of its own.
_PYBIND = re.compile(r"\bpy::|\bpybind11\b|\bPYBIND11_|#\s*include\s*[<\"](?:torch/python\.h|Python\.h)")
# Host code that could give a signature's words another meaning than the binding unit gives them: a macro or a
# type of that name, or declarations added to torch's or std's namespaces.
_WORD = "|".join(sorted(ALLOWED_WORDS))
_REDEFINES = re.compile(
    rf"#\s*define\s+(?:{_WORD})\b|\busing\s+(?:{_WORD})\s*=|\b(?:struct|class|union|enum)\s+(?:{_WORD})\b"
    rf"|\btypedef\b[^;]*\b(?:{_WORD})\s*;|\bnamespace\s+(?:{'|'.join(sorted(NAMESPACES))})\s*\{{"
)


@dataclass(frozen=True)
class BindingPlan:
    """The functions a module binds, by signature (`result(parameter, ...)`, names dropped), in `functions`'
    order, and whether each call goes through torch's error handling (load_inline's with_pytorch_error_handling)."""

    signatures: tuple[str, ...]
    wrap: bool = True

    def as_message(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"signatures": list(self.signatures), "wrap": self.wrap}

    @classmethod
    def from_message(cls, message: Any) -> BindingPlan:
        """A plan from its message; ValueError where it is not one this module would make."""
        if not isinstance(message, dict) or not isinstance(message.get("wrap"), bool):
            raise ValueError("a binding plan is an object with a boolean 'wrap'")
        signatures = message.get("signatures")
        if not isinstance(signatures, list) or not signatures or not all(isinstance(s, str) for s in signatures):
            raise ValueError("a binding plan's signatures are a non-empty list of strings")
        if len(signatures) > MAX_FUNCTIONS:
            raise ValueError(f"a binding plan binds at most {MAX_FUNCTIONS} functions")
        for signature in signatures:
            if len(signature) > MAX_SIGNATURE or _signature_of(signature) != signature:
                raise ValueError(f"not a signature of allowed words: {signature[:200]!r}")
        return cls(tuple(signatures), message["wrap"])

    def key(self, compile_key: str) -> str:
        """The object's cache folder name, for a compiler command and header (`compile_key`)."""
        blob = json.dumps([self.as_message(), compile_key], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:24]

    def source(self) -> str:
        """The binding unit: the functions reached through the host unit's pointers and names."""
        lines = ["#include <torch/extension.h>"]
        for i, signature in enumerate(self.signatures):
            lines += [
                f"using {_PREFIX}type{i} = {signature};",
                f"extern {_PREFIX}type{i}* const {_PREFIX}function{i};",
                f"extern const char* const {_PREFIX}name{i};",
                f"extern const char* const {_PREFIX}doc{i};",
            ]
        lines += [f"extern const char* const {_PREFIX}module;", f"PYBIND11_MODULE({BINDING_MODULE}, m) {{"]
        # pybind11 before 3 names the module by its PYBIND11_MODULE name: the host unit's name is the one seen.
        lines.append(f'  m.attr("__name__") = {_PREFIX}module;')
        for i in range(len(self.signatures)):
            # `+`: a plain pointer value, whose type torch's function traits read.
            target = f"torch::wrap_pybind_function(+{_PREFIX}function{i})" if self.wrap else f"+{_PREFIX}function{i}"
            lines.append(f"  m.def({_PREFIX}name{i}, {target}, {_PREFIX}doc{i});")
        lines.append("}")
        return "\n".join(lines) + "\n"


# The signatures most candidates bind, made when the server starts, in this order: 14, 6 and 4 of the
# build-form corpus's 35 split builds (tests/corpus), the recorded agent trace's on every iteration (three
# tensors); then a tensor and a scalar (a slope, a scale, an epsilon): 3 of the corpus's, as double; public
# candidates write it as double or as float.
COMMON_SIGNATURES = (
    "torch::Tensor(torch::Tensor)",
    "torch::Tensor(torch::Tensor, torch::Tensor)",
    "torch::Tensor(torch::Tensor, torch::Tensor, torch::Tensor)",
    "torch::Tensor(torch::Tensor, double)",
    "torch::Tensor(torch::Tensor, float)",
)


@dataclass(frozen=True)
class Bound:
    """A call's binding: the plan, and what the host unit adds so that the plan's object binds its functions."""

    plan: BindingPlan
    names: tuple[str, ...]
    docs: tuple[str, ...]

    def host_source(self) -> str:
        """Appended to the host unit: the pointers and names the object reads, and the module's entry point.

        Hidden here, they and the object's entry point are hidden in the library (the linker takes the most
        restrictive visibility of a symbol): another extension loaded into the same process, with RTLD_GLOBAL
        too, binds its own.
        """
        lines = [
            "#define PROFSVC_BINDING_JOIN2(a, b) a##b",
            "#define PROFSVC_BINDING_JOIN(a, b) PROFSVC_BINDING_JOIN2(a, b)",
            "#define PROFSVC_BINDING_TEXT2(a) #a",
            "#define PROFSVC_BINDING_TEXT(a) PROFSVC_BINDING_TEXT2(a)",
            f'extern "C" {_HIDDEN} void* PyInit_{BINDING_MODULE}();',
            'extern "C" __attribute__((visibility("default"))) void* '
            "PROFSVC_BINDING_JOIN(PyInit_, TORCH_EXTENSION_NAME)() {",
            f"  return PyInit_{BINDING_MODULE}();",
            "}",
            f"extern {_HIDDEN} const char* const {_PREFIX}module = PROFSVC_BINDING_TEXT(TORCH_EXTENSION_NAME);",
        ]
        for i, (signature, name, doc) in enumerate(zip(self.plan.signatures, self.names, self.docs, strict=True)):
            lines += [
                f"using {_PREFIX}type{i} = {signature};",
                f"extern {_HIDDEN} {_PREFIX}type{i}* const {_PREFIX}function{i} = &{name};",
                f'extern {_HIDDEN} const char* const {_PREFIX}name{i} = "{name}";',
                # As load_inline writes it: the docstring between quotes, as given.
                f'extern {_HIDDEN} const char* const {_PREFIX}doc{i} = "{doc}";',
            ]
        return "\n" + "\n".join(lines) + "\n"


def _tokens(text: str) -> list[str]:
    return [m.group(1) for m in _TOKEN.finditer(text)]


def _spelled(tokens: list[str]) -> str:
    """Tokens as one canonical spelling (spaces only where two words meet)."""
    out = ""
    for token in tokens:
        if out and _IDENTIFIER.fullmatch(token) and (_IDENTIFIER.fullmatch(out[-1]) or out[-1] in ">*&"):
            out += " "
        out += token if token != "," else ", "
    return out


def _parameter_type(tokens: list[str]) -> list[str] | None:
    """A parameter's type, its name dropped; None where it has a default or is not a type of allowed words."""
    if "=" in tokens or not tokens:
        return None
    last = tokens[-1]
    if (
        len(tokens) > 1
        and _IDENTIFIER.fullmatch(last)
        and last not in ALLOWED_WORDS
        and (tokens[-2] in (">", "&", "&&", "*") or _IDENTIFIER.fullmatch(tokens[-2]))
    ):
        tokens = tokens[:-1]
    return tokens if _allowed(tokens) else None


def _allowed(tokens: list[str]) -> bool:
    """Only allowed words, a namespace always followed by `::` and a qualified word always after one."""
    for i, token in enumerate(tokens):
        after = tokens[i + 1] if i + 1 < len(tokens) else ""
        before = tokens[i - 1] if i else ""
        if token in NAMESPACES and (after != "::" or before == "::"):
            return False
        if token in QUALIFIED_WORDS and (before != "::" or tokens[i - 2] not in NAMESPACES):
            return False
        if token == "::" and (before not in NAMESPACES or after not in QUALIFIED_WORDS):
            return False
        if token not in ALLOWED_WORDS and token not in ("::", "<", ">", ",", "&", "&&"):
            return False
    return bool(tokens)


def _signature_of(text: str) -> str | None:
    """`result(parameters)` in canonical spelling, parameter names dropped; None where it is not one to bind."""
    tokens = _tokens(text)
    if "(" not in tokens or tokens[-1] != ")":
        return None
    open_at = tokens.index("(")
    result = [t for t in tokens[:open_at] if t not in _SPECIFIERS]
    if not _allowed(result) or result[-1] == "::":
        return None
    # The first "(" and the last ")" of the text are those of the tokens: tokens keep every other character.
    parts = [_tokens(part) for part in split_top(text[text.index("(") + 1 : text.rindex(")")])]
    parameters: list[str] = []
    if parts not in ([[]], [["void"]]):
        for part in parts:
            kept = _parameter_type(part)
            if kept is None:
                return None
            parameters.append(_spelled(kept))
    return f"{_spelled(result)}({', '.join(parameters)})"


_NEXT_CHARACTER = re.compile(r"\s*(\S?)")


def _declarations(code: str, name: str) -> list[str]:
    """Each top-level declaration or definition of `name` in masked code: its text from the result type to
    the parameter list's closing parenthesis.

    One pass: the brace depth and the last statement boundary are carried from one occurrence to the next (each
    occurrence looked at the whole text before it, so a source of many calls of the name cost its length squared).
    """
    found = []
    depth, boundary, scanned = 0, -1, 0
    for match in re.finditer(rf"\b{re.escape(name)}\s*\(", code):
        depth += code.count("{", scanned, match.start()) - code.count("}", scanned, match.start())
        boundary = max(boundary, *(code.rfind(c, scanned, match.start()) for c in ";{}"))
        scanned = match.start()
        if depth != 0:
            continue  # a call or a declaration inside a function, namespace or class
        last = match.start() - 1
        while last >= 0 and code[last].isspace():
            last -= 1
        if last >= 0 and (code[last] == "." or code[max(0, last - 1) : last + 1] in ("::", "->")):
            continue
        # A preprocessor line before it ends at its newline.
        lines = code[boundary + 1 : match.start()].split("\n")
        head = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
        parens, end = 0, match.end() - 1
        for end in range(match.end() - 1, len(code)):
            parens += {"(": 1, ")": -1}.get(code[end], 0)
            if parens == 0:
                break
        after = _NEXT_CHARACTER.match(code, end + 1).group(1)  # always matches (its group may be empty)
        if after not in (";", "{"):
            return []  # a qualifier after the parameters (noexcept, attributes, a trailing return type)
        found.append(head + code[match.end() - 1 : end + 1])
    return found


_DECLINED = "declined: "


def _bound_signature(glue_code: str, name: Any, doc: Any, count: int) -> str:
    """One function's signature, or `_DECLINED` and why it is not one to bind."""
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name) or not isinstance(doc, str):
        return f"{_DECLINED}the function {str(name)[:80]!r} is not named by a plain identifier"
    if '"' in doc or "\\" in doc or "\n" in doc:
        return f"{_DECLINED}the docstring of {name} holds quotes, backslashes or newlines"
    found = {_signature_of(d) for d in _declarations(glue_code, name)}
    if len(found) != 1 or None in found:
        return f"{_DECLINED}{name} is not declared once, at the top level, with a signature of torch and C++ types"
    signature = str(found.pop())
    if len(signature) > MAX_SIGNATURE or count > MAX_FUNCTIONS:
        return f"{_DECLINED}the functions are too many or their signatures too long for a shared binding"
    return signature


def bound(arguments: dict[str, Any], glue_code: str) -> Bound | str:
    """The call's binding as a shared object, or why its functions are bound in the glue unit.

    `glue_code`: the glue unit's code (cpp_sources and the split's host part), comments and literals masked.
    """
    functions = arguments.get("functions")
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, (list, tuple)):
        functions = {f: f for f in functions}
    if not isinstance(functions, dict) or not functions:
        return "the call binds no functions"
    if _PYBIND.search(glue_code):
        return "the host code uses pybind11 itself"
    if _REDEFINES.search(glue_code):
        return "the host code defines a name the bound signatures use"
    signatures, names, docs = [], [], []
    for name, doc in functions.items():
        signature = _bound_signature(glue_code, name, doc, len(functions))
        if signature.startswith(_DECLINED):
            return signature.removeprefix(_DECLINED)
        signatures.append(signature)
        names.append(name)
        docs.append(doc)
    wrap = arguments.get("with_pytorch_error_handling", True) is not False
    return Bound(BindingPlan(tuple(str(s) for s in signatures), wrap), tuple(names), tuple(docs))
