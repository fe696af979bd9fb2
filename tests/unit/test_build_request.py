"""The server's side of a job's build request: its checks, the key it computes itself, the builder's answer
installed and reused with its route, the glue headers made in a builder run of their own."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from pathlib import Path

import pytest

from profsvc.build.inline_builder import ROUTE_FILE
from profsvc.build.request import BadBuildRequest, BuildRequest
from profsvc.build.service import BuildCacheIndex, BuildService
from profsvc.proc import ProcessResult

KERNEL = (
    '#include "act.cuh"\n__global__ void k(float* x) { x[0] = act(x[0]); }\n'
    "torch::Tensor f(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); return x; }\n"
)
ENV = {"torch": "2.13.0", "cuda": "13.0", "arch": "9.0"}


def _message(folder: str = "/cell/tmp/inc", files: dict | None = None, **arguments) -> dict:
    files = {"act.cuh": "__device__ float act(float x) { return x; }\n"} if files is None else files
    call = {"name": "ext", "cpp_sources": "torch::Tensor f(torch::Tensor x);", "cuda_sources": KERNEL}
    call |= {"functions": ["f"], "extra_include_paths": [folder], **arguments}
    return {"op": "build", "call": "load_inline", "arguments": call, "folders": [{"path": folder, "files": files}]}


def _key(message: dict, environment: dict = ENV) -> str:
    return BuildRequest.from_message(message).key(environment)


def test_folders_sent_by_value_key_by_their_files_not_their_paths():
    one = _key(_message("/cells/a/tmp/inc"))
    # The same files in another job's folder: the same build.
    assert _key(_message("/cells/b/tmp/inc")) == one
    # A header changed, renamed or added: another.
    assert _key(_message(files={"act.cuh": "__device__ float act(float x) { return 2 * x; }\n"})) != one
    assert _key(_message(files={"activation.cuh": "__device__ float act(float x) { return x; }\n"})) != one
    assert _key(_message(files={"act.cuh": "__device__ float act(float x) { return x; }\n", "b.h": ""})) != one
    # Another torch on the server: another build.
    assert _key(_message(), {**ENV, "torch": "2.14.0"}) != one


def test_a_folder_the_job_did_not_send_keys_by_its_path():
    def with_system(path: str) -> str:
        message = _message()
        message["arguments"]["extra_include_paths"].append(path)
        return _key(message)

    assert with_system("/usr/include/eigen3") != with_system("/opt/cutlass/include")


def test_a_loads_sources_key_by_their_text_and_names():
    def load(root: str, files: dict) -> str:
        sources = [f"{root}/ext.cpp", f"{root}/k.cu"]
        arguments = {"name": "ext", "sources": sources, "extra_cuda_cflags": ["-lineinfo"]}
        return _key({"call": "load", "arguments": arguments, "folders": [{"path": root, "files": files}]})

    files = {"ext.cpp": "// bindings\n", "k.cu": KERNEL, "act.cuh": "//\n"}
    assert load("/cells/a/tmp/src", files) == load("/cells/b/tmp/src", files)
    assert load("/cells/a/tmp/src", {**files, "k.cu": KERNEL + "// changed\n"}) != load("/cells/a/tmp/src", files)


def test_a_request_knows_whether_it_compiles_cuda_code():
    assert BuildRequest.from_message(_message()).has_cuda
    assert not BuildRequest.from_message(_message(cuda_sources=None)).has_cuda
    assert not BuildRequest.from_message(_message(cuda_sources=["  \n"])).has_cuda


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"call": "compile"}, "call must be"),
        ({"first_line": -1}, "first_line"),
        ({"first_line": "3"}, "first_line"),
        ({"folders": {"path": "/x"}}, "folders must be a list"),
        ({"folders": [{"path": "relative/inc", "files": {}}]}, "absolute"),
        ({"folders": [{"path": "/cell/../etc", "files": {}}]}, "absolute"),
        ({"folders": [{"path": "/x", "files": {"../escape.h": ""}}]}, "relative name"),
        ({"folders": [{"path": "/x", "files": {"/etc/passwd": ""}}]}, "relative name"),
        ({"folders": [{"path": "/x", "files": {"a//b.h": ""}}]}, "relative name"),
        ({"folders": [{"path": "/x", "files": {"a.h": 3}}]}, "relative name"),
        ({"folders": [{"path": "/x", "files": {"big.h": "x" * ((1 << 20) + 1)}}]}, "over 1 MiB"),
        ({"folders": [{"path": "/x", "files": {f"{n}.h": "" for n in range(513)}}]}, "over 512 files"),
        ({"folders": [{"path": "/x", "files": {}}, {"path": "/x", "files": {}}]}, "sent twice"),
        ({"folders": [{"path": "/x", "files": {}, "mode": 7}]}, "an object of a path"),
    ],
)
def test_a_request_outside_its_bounds_is_refused_in_one_line(change, complaint):
    with pytest.raises(BadBuildRequest, match=complaint) as refused:
        BuildRequest.from_message({**_message(), **change})
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({"name": "ext", "sources": ["/cell/ext.cpp"]}, "not among the files sent"),
        ({"name": "ext", "sources": []}, "names no sources"),
        ({"name": "ext", "sources": ["/x/ext.cpp"], "cpp_sources": "int x;"}, "unknown load argument"),
        ({"name": "ext", "sources": ["/x/ext.cpp"], "extra_include_paths": ["inc"]}, "absolute"),
    ],
)
def test_a_load_must_send_its_sources(arguments, complaint):
    message = {"call": "load", "arguments": arguments, "folders": [{"path": "/x", "files": {"ext.cpp": ""}}]}
    with pytest.raises(BadBuildRequest, match=complaint):
        BuildRequest.from_message(message)


# ---------------------------------------------------------------- the service, its builder stood in for


class Builder:
    """Stands in for the builder's run in a cell: records each request, leaves what a builder would."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[dict] = []
        # Set: the glue headers' run tells it has begun, then waits until it is stopped.
        self.hold_headers: asyncio.Event | None = None
        # Set: what a build's cell says in place of the builder's outcome (user code ran there).
        self.forged: dict | None = None
        # The plans of the shared-binding runs asked for.
        self.plans: list[dict] = []
        # What the glue headers' run says of each header it made.
        self.headers = {"light": "ok", "light-cuda": "ok", "full": "ok"}

    @contextlib.asynccontextmanager
    async def __call__(self, request: dict):
        self.requests.append(request)
        if request.get("op") == "prepare" and self.hold_headers is not None:
            self.hold_headers.set()
            await asyncio.Event().wait()
        cell = self.root / f"cell{len(self.requests)}"
        cell.mkdir(parents=True)
        if request.get("op") == "bind":
            # The object a trusted run makes from the plan alone, under the key it computes.
            self.plans.append(request["plan"])
            key = hashlib.sha256(json.dumps(request["plan"]).encode()).hexdigest()[:24]
            (cell / "binding" / key).mkdir(parents=True)
            (cell / "binding" / key / "binding.o").write_bytes(b"object")
            outcome = {"key": key}
        elif request.get("op") == "prepare":
            (cell / "pch" / "k1").mkdir(parents=True)
            (cell / "pch" / "k1" / "torch_extension.h.gch").write_bytes(b"made")
            outcome = {"headers": self.headers}
        else:
            # What a user's flags could plant in a build's cell: never installed.
            (cell / "pch" / "planted").mkdir(parents=True)
            (cell / "pch" / "planted" / "torch_extension.h.gch").write_bytes(b"planted")
            (cell / "binding" / ("0" * 24)).mkdir(parents=True)
            (cell / "binding" / ("0" * 24) / "binding.o").write_bytes(b"planted")
            route = "split-light" if request["arguments"].get("cuda_sources") else "torch"
            folder = cell / (f"{request['key']}-{route}" if route != "torch" else request["key"])
            folder.mkdir()
            (folder / "ext.so").write_bytes(b"library")
            record = {"route": route, "reason": "", "detail": "", "split_reason": "", "split_line": 0}
            if route == "torch":
                record |= {"reason": "split_declined", "split_reason": "host code uses thrust", "split_line": 4}
                record["detail"] = "host code uses thrust (line 4 of cuda_sources)"
            (folder / ROUTE_FILE).write_text(json.dumps(record))
            outcome = {**record, "ok": True, "built_in": str(folder), "seconds": 2.5, **(self.forged or {})}
        (cell / "result.json").write_text(json.dumps(outcome))
        yield ProcessResult(("builder",), 0, "", "", 1.0, False), cell


async def _environment() -> dict:
    return ENV


def _service(tmp_path: Path) -> tuple[BuildService, Builder]:
    builder = Builder(tmp_path / "cells")
    index = BuildCacheIndex(tmp_path / "cache", tmp_path / "index")
    return BuildService(index, builder, _environment), builder


def test_the_server_keys_the_build_itself_and_answers_again_from_its_cache_with_the_route(tmp_path, caplog):
    service, builder = _service(tmp_path)
    message = {**_message(), "key": "0" * 32, "environment": {"torch": "planted"}, "first_line": 10}
    caplog.set_level(logging.INFO, logger="profsvc.build")
    first = asyncio.run(service.handle(message))
    key = _key(_message())
    assert first["ok"] and not first["cached"] and first["key"] == key != "0" * 32
    assert builder.requests[0] == {"op": "prepare"}  # a CUDA build waits for the glue headers
    assert builder.requests[1]["key"] == key and builder.requests[1]["folders"] == _message()["folders"]
    installed = tmp_path / "cache" / f"{key}-split-light"
    assert first["directory"] == str(installed) and (installed / "ext.so").read_bytes() == b"library"
    assert service.index.verified(f"{key}-split-light")
    hashed = json.loads((tmp_path / "index" / f"{key}-split-light.json").read_text())["files"]
    assert hashed["ext.so"] == hashlib.sha256(b"library").hexdigest() and ROUTE_FILE in hashed
    # The glue headers from their own run are installed; nothing from a build's cell is.
    assert service.index.verified("pch/k1") and not (tmp_path / "cache" / "pch" / "planted").exists()
    assert "built ext (2.5 s): route split-light" in caplog.text
    again = asyncio.run(service.handle(_message("/cells/other/tmp/inc")))
    assert again["cached"] and again["key"] == key and again["route"] == "split-light"
    assert len(builder.requests) == 2


def test_a_cached_builds_reason_names_the_line_in_the_asking_file(tmp_path, caplog):
    service, _ = _service(tmp_path)
    caplog.set_level(logging.INFO, logger="profsvc.build")
    cpp_only = _message(cuda_sources=None)
    first = asyncio.run(service.handle({**cpp_only, "first_line": 30}))
    assert (first["route"], first["reason"]) == ("torch", "split_declined")
    assert first["detail"] == "host code uses thrust (line 33)"
    second = asyncio.run(service.handle({**cpp_only, "first_line": 0}))
    assert second["cached"] and second["detail"] == "host code uses thrust (line 4 of cuda_sources)"
    assert "built ext (cached): route torch; split_declined: host code uses thrust (line 4 of cuda_sources)" in (
        caplog.text
    )


def test_a_build_without_cuda_code_does_not_wait_for_the_glue_headers(tmp_path):
    service, builder = _service(tmp_path)
    reply = asyncio.run(service.handle(_message(cuda_sources=None)))
    assert reply["ok"] and [r.get("op") for r in builder.requests] == ["build"]


def test_a_request_the_server_refuses_reaches_no_builder(tmp_path):
    service, builder = _service(tmp_path)
    reply = asyncio.run(service.handle({**_message(), "folders": [{"path": "/x", "files": {"../a.h": ""}}]}))
    assert reply == {"ok": False, "error": "a folder's file '../a.h' is not a relative name with its text"}
    assert builder.requests == []


def test_a_build_waiting_for_the_glue_headers_goes_on_when_the_server_stops_making_them(tmp_path):
    service, builder = _service(tmp_path)

    async def scenario() -> dict:
        builder.hold_headers = asyncio.Event()
        build = asyncio.ensure_future(service.handle(_message()))
        await builder.hold_headers.wait()
        await service.close()
        return await build

    reply = asyncio.run(scenario())
    assert reply["ok"] and [r["op"] for r in builder.requests] == ["prepare", "build"]
    assert not (tmp_path / "cache" / "pch").exists()


@pytest.mark.parametrize(
    "forged",
    [{"route": "/../../escaped"}, {"route": 7}, {"split_line": "4; rm"}, {"seconds": "fast"}],
    ids=["route out of the cache", "route not text", "line not a number", "seconds not a number"],
)
def test_an_outcome_a_build_forged_in_its_cell_is_not_trusted(tmp_path, forged):
    service, builder = _service(tmp_path)
    builder.forged = forged
    reply = asyncio.run(service.handle(_message(cuda_sources=None)))
    assert not reply["ok"] and reply["log"].startswith("the builder failed")
    # Nothing installed, in the cache or beside it.
    assert {p.name for p in tmp_path.iterdir()} <= {"cache", "cells", "index"}
    assert not list((tmp_path / "cache").glob("*")) and not list((tmp_path / "index").glob("*"))


# ---------------------------------------------------------------- shared bindings

PLAN = {"signatures": ["torch::Tensor(torch::Tensor)"], "wrap": True}


def _binding_runs(service: BuildService, *messages: dict) -> list[dict]:
    """The replies to `messages`, handled one after another, once the shared bindings they asked for are made."""

    async def scenario() -> list[dict]:
        replies = [await service.handle(message) for message in messages]
        await asyncio.gather(*service._bindings.values())
        return replies

    return asyncio.run(scenario())


def test_a_binding_a_build_lacked_is_made_in_a_run_of_its_own_once_and_installed(tmp_path):
    service, builder = _service(tmp_path)
    builder.forged = {"binding": PLAN}
    replies = _binding_runs(service, _message(), _message(cuda_sources=KERNEL + "// changed\n"))
    assert all(reply["ok"] for reply in replies)
    assert [r["op"] for r in builder.requests] == ["prepare", "build", "bind", "build"]
    assert builder.plans == [PLAN]  # the second build's plan was asked for already
    (made,) = (tmp_path / "cache" / "binding").iterdir()
    assert service.index.verified(f"binding/{made.name}") and (made / "binding.o").read_bytes() == b"object"
    # What a build's cell held under binding/ (its user's flags ran there) is not installed.
    assert not (tmp_path / "cache" / "binding" / ("0" * 24)).exists()


@pytest.mark.parametrize(
    "plan",
    [
        {"signatures": ["Tensor(Tensor)"], "wrap": True},
        {"signatures": ["int(decltype([]{ return 0; }()))"], "wrap": True},
        {"signatures": ["torch::Tensor(torch::Tensor)"]},
        "torch::Tensor(torch::Tensor)",
    ],
)
def test_a_plan_that_is_not_one_the_server_would_make_starts_no_run(tmp_path, plan):
    service, builder = _service(tmp_path)
    builder.forged = {"binding": plan} if isinstance(plan, dict) else {}
    (reply,) = _binding_runs(service, _message())
    assert reply["ok"] and "bind" not in [r["op"] for r in builder.requests]


def test_a_closing_server_starts_no_binding(tmp_path):
    service, builder = _service(tmp_path)
    builder.forged = {"binding": PLAN}

    async def scenario() -> None:
        await service.close()
        await service.handle(_message())

    asyncio.run(scenario())
    assert builder.plans == [] and not service._bindings


def test_the_sweep_keeps_verified_bindings_and_removes_the_others(tmp_path):
    service, builder = _service(tmp_path)
    builder.forged = {"binding": PLAN}
    _binding_runs(service, _message())
    (made,) = (tmp_path / "cache" / "binding").iterdir()
    stray = tmp_path / "cache" / "binding" / ("1" * 24)
    stray.mkdir()
    (stray / "binding.o").write_bytes(b"left by an older server")
    changed = tmp_path / "cache" / "binding" / ("2" * 24)
    changed.mkdir()
    (changed / "binding.o").write_bytes(b"object")
    (tmp_path / "index" / f"binding__{'2' * 24}.json").write_text(json.dumps({"files": {"binding.o": "0" * 64}}))
    BuildCacheIndex(tmp_path / "cache", tmp_path / "index").sweep()
    assert [p.name for p in (tmp_path / "cache" / "binding").iterdir()] == [made.name]


def test_the_commonest_bindings_are_made_once_the_headers_are_and_only_then(tmp_path):
    for made in (True, False):
        service, builder = _service(tmp_path / str(made))
        builder.headers |= {"types": "ok", "bind": "ok" if made else "error: pybind11/pybind11.h not found"}
        _binding_runs(service, _message())
        expected = [{"signatures": [s], "wrap": True} for s in COMMON] if made else []
        assert builder.plans == expected


COMMON = (
    "torch::Tensor(torch::Tensor)",
    "torch::Tensor(torch::Tensor, torch::Tensor)",
    "torch::Tensor(torch::Tensor, torch::Tensor, torch::Tensor)",
    "torch::Tensor(torch::Tensor, double)",
    "torch::Tensor(torch::Tensor, float)",
)
