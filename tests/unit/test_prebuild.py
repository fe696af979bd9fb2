"""Finding a problem's lazy load_inline calls whose arguments are known without running its code."""

from __future__ import annotations

import importlib.util
import textwrap
from types import ModuleType

import pytest

from profsvc.worker.prebuild import lazy_load_inline_calls
from tests.conftest import FIXTURES

SEED = FIXTURES / "seed47.py"


@pytest.fixture(scope="module")
def seed() -> ModuleType:
    """The seed problem imported from its path, as the compile worker imports a user's file."""
    spec = importlib.util.spec_from_file_location("profsvc_test_seed47", SEED)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _calls(source: str, **namespace):
    return lazy_load_inline_calls(textwrap.dedent(source), namespace)


def test_seed_lazy_call_inside_ext_is_found_with_the_module_globals(seed):
    calls = lazy_load_inline_calls(SEED.read_text(), vars(seed))
    assert len(calls) == 1
    args, kwargs = calls[0]
    assert args == []
    assert kwargs == {
        "name": "vga_linear_probe",
        "cpp_sources": seed._cpp_src,
        "cuda_sources": seed._cuda_src,
        "functions": ["vga_linear_forward"],
        "verbose": False,
        "extra_cuda_cflags": ["-O3", "--use_fast_math"],
        "extra_cflags": ["-O3"],
    }
    # The very objects the module holds: the later call in the GPU job computes the same cache key.
    assert kwargs["cpp_sources"] is seed._cpp_src
    assert kwargs["cuda_sources"] is seed._cuda_src


def test_module_level_calls_are_not_included():
    calls = _calls(
        """
        EAGER = load_inline(name="eager", cpp_sources=SRC)
        def lazy():
            return load_inline(name="lazy", cpp_sources=SRC)
        """,
        SRC="src",
    )
    assert calls == [([], {"name": "lazy", "cpp_sources": "src"})]


LEFT_TO_RUN = {
    "local variable": """
        def f():
            src = "int x;"
            return load_inline(name="a", cpp_sources=src)
        """,
    "parameter": """
        def f(src):
            return load_inline(name="a", cpp_sources=src)
        """,
    "function call": """
        def f():
            return load_inline(name="a", cpp_sources=make_source())
        """,
    "f-string": """
        def f():
            return load_inline(name=f"a{N}", cpp_sources=SRC)
        """,
    "**kwargs": """
        def f():
            return load_inline(**OPTIONS)
        """,
    "*args": """
        def f():
            return load_inline(*ARGS)
        """,
    "attribute of a global": """
        def f():
            return load_inline(name="a", cpp_sources=CONFIG.source)
        """,
    "dict with ** unpacking": """
        def f():
            return load_inline(name="a", cpp_sources=SRC, extra={**OPTIONS})
        """,
    "arithmetic": """
        def f():
            return load_inline(name="a", cpp_sources=SRC + SRC)
        """,
}


@pytest.mark.parametrize("source", LEFT_TO_RUN.values(), ids=LEFT_TO_RUN.keys())
def test_calls_whose_arguments_need_the_code_to_run_are_skipped(source):
    # Every global name these sources use exists: only what cannot be known statically stops them.
    namespace = {
        "SRC": "int x;",
        "N": 1,
        "OPTIONS": {"name": "a"},
        "ARGS": ["a", "int x;"],
        "CONFIG": object(),
        "make_source": lambda: "int x;",
    }
    assert lazy_load_inline_calls(textwrap.dedent(source), namespace) == []


def test_a_skipped_call_does_not_hide_a_static_one_in_the_same_function():
    calls = _calls(
        """
        def f(src):
            first = load_inline(name="dynamic", cpp_sources=src)
            second = load_inline(name="static", cpp_sources=SRC)
            return first, second
        """,
        SRC="s",
    )
    assert calls == [([], {"name": "static", "cpp_sources": "s"})]


def test_load_inline_reached_as_an_attribute_is_found():
    calls = _calls(
        """
        import torch
        from torch.utils import cpp_extension
        def a():
            return cpp_extension.load_inline(name="a", cpp_sources=SRC)
        def b():
            return torch.utils.cpp_extension.load_inline(name="b", cpp_sources=SRC)
        """,
        SRC="s",
    )
    assert calls == [([], {"name": "a", "cpp_sources": "s"}), ([], {"name": "b", "cpp_sources": "s"})]


def test_other_calls_are_not_taken_for_load_inline():
    calls = _calls(
        """
        def f():
            load(name="a", sources=["a.cpp"])
            cpp_extension.load(name="b", sources=["b.cpp"])
            return load_inline_later(name="c", cpp_sources="s")
        """
    )
    assert calls == []


def test_positional_literal_and_container_arguments_are_evaluated():
    calls = _calls(
        """
        def f():
            return load_inline("n", SRC, cuda_sources=[CU, "// tail"], functions=("go",),
                               extra_ldflags=None, build_options={"opt": LEVEL})
        """,
        SRC="cpp",
        CU="cu",
        LEVEL=3,
    )
    assert calls == [
        (
            ["n", "cpp"],
            {
                "cuda_sources": ["cu", "// tail"],
                "functions": ["go"],
                "extra_ldflags": None,
                "build_options": {"opt": 3},
            },
        )
    ]


def test_calls_in_methods_and_async_functions_are_found():
    calls = _calls(
        """
        class Model:
            def forward(self, x):
                return load_inline(name="method", cpp_sources="s")
        async def later():
            return load_inline(name="async", cpp_sources="s")
        """
    )
    assert sorted(kwargs["name"] for _, kwargs in calls) == ["async", "method"]


def test_a_call_in_a_nested_function_is_found_once():
    calls = _calls(
        """
        class Model:
            def forward(self, x):
                def build():
                    def inner():
                        return load_inline(name="nested", cpp_sources="s")
                    return inner()
                return build()
        """
    )
    assert calls == [([], {"name": "nested", "cpp_sources": "s"})]
