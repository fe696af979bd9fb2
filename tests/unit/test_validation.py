"""Bad input is refused with one clear line and the right reason code."""

from __future__ import annotations

import pytest

from profsvc.config import Limits
from profsvc.kinds import Verb
from profsvc.server.validation import (
    validate_clock_control,
    validate_derived,
    validate_filter,
    validate_metric_set,
    validate_metrics,
    validate_precision,
    validate_source,
)
from profsvc_contract._proto import profiler_pb2 as pb
from profsvc_contract.convert import enum_value
from profsvc_contract.errors import InvalidRequest, Reason
from profsvc_contract.models import ClockControl, KernelFilter, KernelSource, Precision, SourceFile, SourceKind
from tests.conftest import FIXTURES

LIMITS = Limits(max_source_bytes=4096)
PROBLEM = b"class Model: pass\nclass ModelNew: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"


def _source(name: str, content: bytes, **extra) -> KernelSource:
    return KernelSource(main=SourceFile(name=name, content=content), **extra)


@pytest.mark.parametrize(
    ("source", "reason", "text"),
    [
        (_source("k.py", b""), Reason.EMPTY_SOURCE, "empty"),
        (_source("k.py", b"  \n\t"), Reason.EMPTY_SOURCE, "whitespace"),
        (_source("k.py", b"x" * 5000), Reason.SOURCE_TOO_LARGE, "5,000 bytes"),
        (_source("k.py", b"\xff\xfe bad"), Reason.SOURCE_NOT_UTF8, "not UTF-8"),
        (_source("k.py", b"def f(:\n"), Reason.SYNTAX_ERROR, "k.py:1:"),
        (_source("k.py", b"class ModelNew: pass\n"), Reason.MISSING_SYMBOL, "Model, get_inputs, get_init_inputs"),
        (_source("k.txt", b"x"), Reason.BAD_SOURCE_KIND, ".py"),
        (_source("../etc/passwd.py", PROBLEM), Reason.BAD_ARGUMENT, "not allowed"),
        (_source(".hidden.py", PROBLEM), Reason.BAD_ARGUMENT, "not allowed"),
        (_source("-rf.py", PROBLEM), Reason.BAD_ARGUMENT, "not allowed"),
        (_source("p.cu", b"__global__ void k() {}\n"), Reason.MISSING_SYMBOL, "int main("),
        (_source("p.cu", b"int main() {}", nvcc_flags=["-o/tmp/x"]), Reason.BAD_ARGUMENT, "nvcc flag"),
    ],
)
def test_bad_sources(source, reason, text):
    with pytest.raises(InvalidRequest) as caught:
        validate_source(source, LIMITS, Verb.PROFILE)
    assert caught.value.reason == reason
    assert text in caught.value.message
    assert "\n" not in caught.value.message


def test_seed_problem_and_split_reference_are_accepted():
    spec = validate_source(_source("seed47.py", (FIXTURES / "seed47.py").read_bytes()), Limits(), Verb.EVALUATE)
    assert spec.kind == SourceKind.PYTHON_PROBLEM
    split = KernelSource(
        main=SourceFile(name="cand.py", content=b"class ModelNew: pass\n"),
        reference=SourceFile(
            name="ref.py", content=b"class Model: pass\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n"
        ),
    )
    assert validate_source(split, LIMITS, Verb.EVALUATE).reference_name == "ref.py"


def test_kernelbench_file_names_are_accepted():
    # KernelBench names its problems by number: 19_ReLU.py.
    spec = validate_source(_source("19_ReLU.py", (FIXTURES / "seed47.py").read_bytes()), Limits(), Verb.PROFILE)
    assert spec.main_name == "19_ReLU.py"


def test_reference_missing_names_is_named():
    split = KernelSource(
        main=SourceFile(name="cand.py", content=b"class ModelNew: pass\n"),
        reference=SourceFile(name="ref.py", content=b"class Model: pass\n"),
    )
    with pytest.raises(InvalidRequest, match=r"ref\.py defines no get_inputs, get_init_inputs"):
        validate_source(split, LIMITS, Verb.EVALUATE)


def test_filters_and_metric_sets():
    with pytest.raises(InvalidRequest, match="regex"):
        validate_filter(KernelFilter(name_regex="(unclosed"), LIMITS)
    with pytest.raises(InvalidRequest, match="limit"):
        validate_filter(KernelFilter(launch_count=10_000), LIMITS)
    with pytest.raises(InvalidRequest, match="default") as caught:
        validate_metric_set("everything")
    assert caught.value.reason == Reason.UNKNOWN_METRIC_SET
    assert validate_metric_set("").name == "default"


def test_default_set_collects_every_catalog_metric_beside_its_sections():
    from profsvc.metrics.catalog import load_catalog

    args = validate_metric_set("").collection_args()
    assert "--set" not in args and args.count("--section") >= 5
    assert args[args.index("--metrics") + 1].split(",") == load_catalog().metric_names()
    assert validate_metric_set("basic").collection_args() == ("--set", "basic")


def test_metrics_a_request_names_join_the_sets_one_metrics_list():
    from profsvc.metrics.catalog import load_catalog

    extra = ("dram__bytes_read.sum.per_second", "sm__cycles_active.max")
    args = validate_metric_set("").collection_args(extra)
    assert args.count("--metrics") == 1
    assert args[args.index("--metrics") + 1].split(",") == [*load_catalog().metric_names(), *extra]
    # A set of sections alone gains a --metrics list of just the named ones; a name already listed is listed once.
    assert validate_metric_set("basic").collection_args(extra[:1]) == ("--set", "basic", "--metrics", extra[0])
    named = load_catalog().metric_names()[0]
    assert validate_metric_set("").collection_args([named]) == validate_metric_set("").collection_args()


@pytest.mark.parametrize(
    "name", ["", "dram", "DRAM__bytes.sum", "dram__bytes read.sum", "dram__bytes.sum,--set=full", "a__b..sum"]
)
def test_a_name_that_is_no_ncu_metric_is_refused(name):
    with pytest.raises(InvalidRequest, match="metric") as caught:
        validate_metrics([name])
    assert caught.value.reason == Reason.BAD_ARGUMENT


def test_metric_names_are_kept_once_and_bounded():
    assert validate_metrics(["gpu__time_duration.sum", "l1tex__t_bytes.sum", "gpu__time_duration.sum"]) == (
        "gpu__time_duration.sum",
        "l1tex__t_bytes.sum",
    )
    with pytest.raises(InvalidRequest, match="at most"):
        validate_metrics([f"sm__metric_{i}.sum" for i in range(1000)])


@pytest.mark.parametrize("include", ["/", "//", "domain@/", "regex:/"])
def test_an_nvtx_include_that_names_no_range_is_refused(include):
    with pytest.raises(InvalidRequest) as caught:
        validate_filter(KernelFilter(nvtx_include=[include]), LIMITS)
    assert caught.value.reason == Reason.BAD_FILTER and "names no range" in caught.value.message


@pytest.mark.parametrize("include", ["profsvc/", "A/B/", "domain@range/", "regex:.+/", "range"])
def test_nvtx_includes_that_name_a_range_are_kept(include):
    assert validate_filter(KernelFilter(nvtx_include=[include]), LIMITS).nvtx_include == [include]


def test_names_defined_under_try_and_if_count():
    seed = (FIXTURES / "seed47.py").read_text().replace("def get_init_inputs", "def _unused")
    text = seed + "\ntry:\n    def get_init_inputs():\n        return []\nexcept ImportError:\n    raise\n"
    assert validate_source(_source("tryblock.py", text.encode()), Limits(), Verb.EVALUATE).main_name == "tryblock.py"


@pytest.mark.parametrize(
    ("content", "text"),
    [(b"x = " + b"-" * 100_000 + b"1\n", "nested too deeply"), (b"x = 1\x00\n", "tricky.py: syntax error")],
    ids=["deep nesting", "NUL byte"],
)
def test_sources_the_parser_refuses_are_syntax_errors(content, text):
    with pytest.raises(InvalidRequest) as caught:
        validate_source(_source("tricky.py", content), Limits(), Verb.PROFILE)
    assert caught.value.reason == Reason.SYNTAX_ERROR and text in caught.value.message
    assert "None" not in caught.value.message


def test_derived_metrics_are_parsed_and_their_names_kept_apart():
    ok = ("bw=dram__bytes_read.sum / gpu__time_duration.sum",)
    assert validate_derived(ok, ()) == ok
    for texts, metrics, why in [
        (("bw=dram__bytes_read.sum", "bw=gpu__time_duration.sum"), (), "named twice"),
        (("bw=dram__bytes_read.sum +",), (), "cannot parse"),
        (("bw=1",), (), "names no ncu metric"),
        (("duration=gpu__time_duration.sum",), (), "catalog figure"),
        ((f"m{i}=dram__bytes_read.sum" for i in range(100)), (), "at most"),
    ]:
        with pytest.raises(InvalidRequest, match=why) as caught:
            validate_derived(tuple(texts), metrics)
        assert caught.value.reason == Reason.BAD_ARGUMENT


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (pb.PRECISION_UNSPECIFIED, Precision.FP32),
        (pb.PRECISION_FP32, Precision.FP32),
        (pb.PRECISION_FP16, Precision.FP16),
        (pb.PRECISION_BF16, Precision.BF16),
    ],
)
def test_a_requests_precision_and_its_default(number, expected):
    request = pb.CheckCorrectnessRequest(precision=number)
    assert validate_precision(enum_value(request, "precision")) is expected


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (pb.CLOCK_CONTROL_UNSPECIFIED, ClockControl.NONE),
        (pb.CLOCK_CONTROL_NONE, ClockControl.NONE),
        (pb.CLOCK_CONTROL_BASE, ClockControl.BASE),
    ],
)
def test_a_requests_clock_control_and_its_default(number, expected):
    request = pb.ProfileRequest(clock_control=number)
    assert validate_clock_control(enum_value(request, "clock_control")) is expected


@pytest.mark.parametrize(
    ("message", "field", "validate", "choices"),
    [
        (pb.EvaluateRequest, "precision", validate_precision, "fp32, fp16, bf16"),
        (pb.EvaluateRequest, "clock_control", validate_clock_control, "none, base"),
    ],
)
def test_a_value_this_server_does_not_know_is_refused_listing_the_choices(message, field, validate, choices):
    # A number no value of the enum has, as a newer client's would be: proto3 keeps it, the server refuses it.
    request = message(**{field: 9})
    with pytest.raises(InvalidRequest) as caught:
        validate(enum_value(request, field))
    assert caught.value.reason == Reason.BAD_ARGUMENT
    assert caught.value.message.endswith(f"'9' is not one of {choices}")
    assert "\n" not in caught.value.message
