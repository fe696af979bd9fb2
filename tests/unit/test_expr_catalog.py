"""The formula language and the catalog's load-time validation."""

from __future__ import annotations

import pytest

from profsvc.metrics.catalog import CatalogError, load_catalog, parse_catalog
from profsvc.metrics.expr import ExpressionError, compile_expr, names_in

GOOD = {
    "name": "ratio",
    "label": "Ratio",
    "unit": "1",
    "better": "higher",
    "group": "memory",
    "meaning": "a / b",
    "formula": "a / b",
    "inputs": {"a": ["m_a"], "b": ["m_b"]},
}


def test_arithmetic_and_missing_values():
    f = compile_expr("(a + b) * 2 - c / 4")
    assert f({"a": 1.0, "b": 2.0, "c": 8.0}) == 4.0
    assert f({"a": 1.0, "b": None, "c": 8.0}) is None
    assert compile_expr("a / b")({"a": 1.0, "b": 0.0}) is None


def test_comparisons_and_three_valued_logic():
    f = compile_expr("a > 1 and b < 2")
    assert f({"a": 2.0, "b": 1.0}) is True
    assert f({"a": 0.0, "b": None}) is False
    assert f({"a": 2.0, "b": None}) is None
    assert compile_expr("a > 1 or b > 1")({"a": 2.0, "b": None}) is True
    assert compile_expr("min(a, b) + max(a, b) + abs(-a)")({"a": 1.0, "b": 3.0}) == 5.0


@pytest.mark.parametrize("source", ["__import__('os')", "a.b", "a[0]", "lambda: 1", "open('x')", "a ** 2"])
def test_unsafe_or_unsupported_syntax_is_rejected(source):
    with pytest.raises(ExpressionError):
        compile_expr(source)


def test_unknown_names_are_rejected():
    with pytest.raises(ExpressionError, match="unknown name"):
        compile_expr("a + zz", {"a"})
    assert names_in("min(a, b) / c") == {"a", "b", "c"}


def test_shipped_catalog_loads_with_unique_names():
    catalog = load_catalog()
    assert len(catalog.by_name) == len(catalog.figures) > 20
    assert all(f.unit and f.meaning for f in catalog.figures)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"inputs": {"a": ["m_a"]}}, "unknown name"),
        ({"metric": ["x"]}, "exactly one"),
        ({"better": "sideways"}, "better"),
        ({"name": "Bad Name"}, "snake_case"),
        ({"formula": "a +"}, "cannot parse"),
    ],
)
def test_malformed_entry_is_rejected_naming_it(change, message):
    entry = {**GOOD, **change}
    with pytest.raises(CatalogError, match=message) as caught:
        parse_catalog({"figure": [entry]})
    assert repr(entry["name"]) in str(caught.value)


def test_duplicate_entry_is_rejected():
    with pytest.raises(CatalogError, match="defined twice"):
        parse_catalog({"figure": [GOOD, GOOD]})
