"""Resolve names in a candidate module to what they import: ``F.linear`` -> ``torch.nn.functional.linear``.

Scoping is ignored on purpose: a candidate that shadows ``torch`` locally to
dodge the checker is as suspicious as one that calls it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable


def dotted(node: ast.AST) -> str | None:
    """The dotted path of a Name/Attribute chain (``self.proj.weight``), None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def root(node: ast.AST) -> ast.AST:
    """The innermost receiver of a chain of attribute reads, subscripts and calls (``x`` of ``x.a[0].b()``)."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


class ImportMap:
    """Local names bound by imports (and plain module aliases such as ``cuda = torch.cuda``)."""

    def __init__(self, tree: ast.Module, nodes: Iterable[ast.AST] | None = None) -> None:
        """`nodes`: every node of the tree, when the caller has walked it already."""
        self.aliases: dict[str, str] = {}
        for node in ast.walk(tree) if nodes is None else nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    # `import a.b` binds `a`; `import a.b as c` binds `c` to `a.b`.
                    local = alias.asname or alias.name.split(".")[0]
                    self.aliases[local] = alias.name if alias.asname else local
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                target = self.resolve(stmt.value)
                if target is not None:
                    self.aliases.setdefault(stmt.targets[0].id, target)

    def resolve(self, node: ast.AST) -> str | None:
        """The imported dotted path a Name/Attribute chain refers to; None when its root is not an import."""
        path = dotted(node)
        if path is None:
            return None
        head, _, rest = path.partition(".")
        base = self.aliases.get(head)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    def is_module_root(self, node: ast.AST) -> bool:
        """Whether the chain's root name was bound by an import."""
        base = root(node)
        return isinstance(base, ast.Name) and base.id in self.aliases
