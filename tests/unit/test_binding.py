"""The shared binding of a load_inline call's functions (profsvc.build.binding): which calls get one, and its plan.

Expected signatures are written from the C++ declarations, parameter names dropped as the language ignores them.
"""

from __future__ import annotations

import time

import pytest

from profsvc.build.binding import BindingPlan, bound
from profsvc.worker.inline_split import mask


def _bound(code: str, functions, **arguments):
    return bound({"functions": functions, **arguments}, mask(code))


@pytest.mark.parametrize(
    ("code", "signature"),
    [
        ("torch::Tensor f(torch::Tensor x);", "torch::Tensor(torch::Tensor)"),
        (
            "torch::Tensor f(torch::Tensor a, torch::Tensor b) { return a; }",
            "torch::Tensor(torch::Tensor, torch::Tensor)",
        ),
        ("at::Tensor f(const at::Tensor& input, double eps);", "at::Tensor(const at::Tensor&, double)"),
        ("torch::Tensor f(torch::Tensor, int64_t);", "torch::Tensor(torch::Tensor, int64_t)"),
        ("torch::Tensor f(torch::Tensor x, float negative_slope);", "torch::Tensor(torch::Tensor, float)"),
        ("torch::Tensor f(torch::Tensor x, double s) {\n  return x * s;\n}", "torch::Tensor(torch::Tensor, double)"),
        (
            "std::vector<torch::Tensor> f(torch::Tensor x, std::vector<int64_t> sizes);",
            "std::vector<torch::Tensor>(torch::Tensor, std::vector<int64_t>)",
        ),
        ("void f(torch::Tensor out, unsigned int n);", "void(torch::Tensor, unsigned int)"),
        ("static inline torch::Tensor f(void) { return {}; }", "torch::Tensor()"),
        (
            "// torch::Tensor f(int);\ntorch::Tensor f(c10::optional<torch::Tensor> bias);",
            "torch::Tensor(c10::optional<torch::Tensor>)",
        ),
    ],
)
def test_a_declared_function_is_bound_by_its_signature_without_parameter_names(code, signature):
    shared = _bound(code, ["f"])
    assert not isinstance(shared, str), shared
    assert shared.plan.signatures == (signature,) and shared.names == ("f",) and shared.docs == ("f",)


def test_a_declaration_and_its_definition_agree_and_calls_in_bodies_do_not_count():
    code = "torch::Tensor f(torch::Tensor x);\ntorch::Tensor g(torch::Tensor y) { return f(y); }\n"
    code += "torch::Tensor f(torch::Tensor y) { return y; }"
    shared = _bound(code, {"f": "doc of f", "g": "g"})
    assert not isinstance(shared, str)
    assert shared.plan.signatures == ("torch::Tensor(torch::Tensor)", "torch::Tensor(torch::Tensor)")
    assert shared.docs == ("doc of f", "g")


@pytest.mark.parametrize(
    ("code", "functions", "why"),
    [
        ("torch::Tensor f(torch::Tensor x);", None, "binds no functions"),
        ("torch::Tensor f(torch::Tensor x, int n = 2);", ["f"], "not declared once"),
        ("torch::Tensor f(torch::Tensor x);\ntorch::Tensor f(torch::Tensor x, double s);", ["f"], "not declared once"),
        ("namespace k { torch::Tensor f(torch::Tensor x); }", ["f"], "not declared once"),
        ("MyTensor f(MyTensor x);", ["f"], "not declared once"),
        ("auto f(torch::Tensor x) -> torch::Tensor;", ["f"], "not declared once"),
        ("torch::Tensor f(float* x);", ["f"], "not declared once"),
        ("py::object f(torch::Tensor x);", ["f"], "pybind11"),
        ("torch::Tensor f(torch::Tensor x);", ["k::f"], "plain identifier"),
        ("torch::Tensor f(torch::Tensor x);", {"f": 'say "hi"'}, "quotes"),
        # The binding unit reads the words as torch and std name them, with no `using` of the user's.
        ("using torch::Tensor;\nTensor f(Tensor x);", ["f"], "not declared once"),
        ("torch::Dtype f(torch::Tensor x);", ["f"], "not declared once"),
        ("torch::Tensor f(torch::Tensor x, std::int64_t n);", ["f"], "not declared once"),
        # Where the host unit could read a word otherwise than the binding unit does.
        ("#define double float\ntorch::Tensor f(torch::Tensor x, double s);", ["f"], "defines a name"),
        ("namespace torch { using T = int; }\ntorch::Tensor f(torch::Tensor x);", ["f"], "defines a name"),
        ("using Tensor = int;\ntorch::Tensor f(torch::Tensor x);", ["f"], "defines a name"),
    ],
)
def test_what_the_shared_binding_does_not_stand_in_for_is_bound_in_the_glue_unit(code, functions, why):
    shared = _bound(code, functions)
    assert isinstance(shared, str) and why in shared


def test_with_pytorch_error_handling_off_binds_the_plain_function():
    shared = _bound("torch::Tensor f(torch::Tensor x);", ["f"], with_pytorch_error_handling=False)
    assert not isinstance(shared, str) and not shared.plan.wrap
    assert "wrap_pybind_function" not in shared.plan.source()
    assert "wrap_pybind_function(+__profsvc_binding_function0)" in BindingPlan(shared.plan.signatures).source()


def test_a_plan_names_no_function_or_module_so_every_candidate_with_its_signatures_shares_it():
    one = _bound("torch::Tensor relu(torch::Tensor x);", ["relu"])
    other = _bound("torch::Tensor gelu_forward(torch::Tensor input);", {"gelu_forward": "GELU"})
    assert not isinstance(one, str) and not isinstance(other, str)
    assert one.plan == other.plan and one.plan.key("c") == other.plan.key("c") != one.plan.key("d")
    assert "relu" not in one.plan.source() and "relu" in one.host_source()


@pytest.mark.parametrize(
    "message",
    [
        {"signatures": ["torch::Tensor(torch::Tensor)"]},
        {"signatures": [], "wrap": True},
        {"signatures": ['int(decltype([]{ return system("x"); }()))'], "wrap": True},
        {"signatures": ["torch::Tensor(torch::Tensor);\nint x = 1"], "wrap": True},
        {"signatures": ["torch::Tensor (torch::Tensor)"], "wrap": True},  # not the canonical spelling
        {"signatures": ["Tensor(Tensor)"], "wrap": True},
        {"signatures": ["torch::torch::Tensor(int)"], "wrap": True},
        "torch::Tensor(torch::Tensor)",
    ],
)
def test_a_plan_from_a_message_is_refused_unless_it_is_one_this_module_makes(message):
    with pytest.raises(ValueError):
        BindingPlan.from_message(message)


def test_a_plan_binds_at_most_64_functions():
    many = {"signatures": ["void()"] * 65, "wrap": True}
    with pytest.raises(ValueError, match="at most 64"):
        BindingPlan.from_message(many)
    code = "".join(f"void f{i}();\n" for i in range(65))
    assert "too many" in _bound(code, [f"f{i}" for i in range(65)])


def test_a_plan_round_trips_through_its_message():
    plan = BindingPlan(("std::vector<torch::Tensor>(const torch::Tensor&, int64_t)",), wrap=False)
    assert BindingPlan.from_message(plan.as_message()) == plan


@pytest.mark.slow  # three C++ builds against torch's headers: about two minutes on two cores
def test_modules_bound_by_one_shared_binding_import_under_their_names_and_call_their_own_functions(
    tmp_path, monkeypatch
):
    import ctypes
    import importlib.util
    import shutil
    import sys
    from pathlib import Path

    import torch
    from torch.utils import cpp_extension

    from profsvc.build.inline_builder import BINDING_OBJECT, GLUE_HEADERS, make_binding, torch_builders
    from profsvc.build.routes import GLUE_TYPES, glue_cflags

    nvcc = shutil.which("nvcc")
    assert nvcc, "nvcc (the CUDA 13.0 toolkit) is not on PATH"
    # The glue flags name CUDA's headers, which a torch built without CUDA does not find by itself.
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", str(Path(nvcc).resolve().parent.parent))
    # Extensions loaded with RTLD_GLOBAL, as some programs do: each must still bind its own function (functions
    # of one name in two extensions would interpose on each other so, whatever binds them: these differ).
    monkeypatch.setattr(sys, "getdlopenflags", sys.getdlopenflags)
    sys.setdlopenflags(sys.getdlopenflags() | ctypes.RTLD_GLOBAL)
    builders = torch_builders()
    # The host unit as split-bind compiles it: against torch's tensor headers alone, read as text here.
    types = tmp_path / "types"
    (types / "torch").mkdir(parents=True)
    (types / "torch" / "extension.h").write_text(GLUE_HEADERS[GLUE_TYPES])
    modules = {}
    for name, factor in (("twice_ext", 2), ("thrice_ext", 3)):
        function = f"scale{factor}"
        body = f"torch::Tensor {function}(const torch::Tensor& x) {{ return x * {factor}; }}\n"
        host = "#include <torch/extension.h>\n" + body
        shared = _bound(host, {function: f"times {factor}"})
        assert not isinstance(shared, str)
        key = make_binding(tmp_path / "cache", tmp_path / "staging", shared.plan, builders)
        made = tmp_path / "staging" / "binding" / key / BINDING_OBJECT
        assert made.is_file()
        build = tmp_path / name
        build.mkdir()
        builders.load_inline(
            name=name,
            cpp_sources=[host + shared.host_source()],
            extra_cflags=[*glue_cflags([]), "-I", str(types)],
            extra_ldflags=[str(made)],
            build_directory=str(build),
        )
        spec = importlib.util.spec_from_file_location(name, build / f"{name}.so")
        assert spec is not None and spec.loader is not None
        modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(modules[name])
    twice, thrice = modules["twice_ext"], modules["thrice_ext"]
    assert (twice.__name__, thrice.__name__) == ("twice_ext", "thrice_ext")
    assert twice.scale2.__doc__.strip().endswith("times 2") and thrice.scale3.__doc__.strip().endswith("times 3")
    assert twice.scale2(torch.tensor([1.5, -2.0])).tolist() == [3.0, -4.0]
    assert thrice.scale3(torch.tensor([1.5, -2.0])).tolist() == [4.5, -6.0]
    with pytest.raises(TypeError):
        twice.scale2("not a tensor")


def test_a_source_of_many_calls_of_a_bound_name_is_read_in_linear_time():
    # Each occurrence of the name looked at the whole text before it: 128 KB of `f();` took 11.5 s. Linear, 512 KiB
    # takes about four times what 128 KiB takes; quadratic, sixteen.
    seconds = {}
    for calls in (32_000, 128_000):
        code = "torch::Tensor f(torch::Tensor x);\n" + "f();" * calls
        start = time.perf_counter()
        # Every `f();` reads as a declaration at the top level, with no type before it: not one signature.
        assert isinstance(_bound(code, ["f"]), str)
        seconds[calls] = time.perf_counter() - start
    assert seconds[128_000] < 2.0 or seconds[128_000] / seconds[32_000] <= 8, seconds
