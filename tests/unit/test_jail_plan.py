"""The jail's command line, the cache's index and the judge's relay, without starting a jail."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from profsvc.build.request import BadBuildRequest, check_arguments
from profsvc.build.service import BuildCacheIndex
from profsvc.jail.command import JailPlan, bwrap_argv
from profsvc.jail.host import Jail, network_folders, readonly_trees
from profsvc.scheduler.relay import Relay, move_files
from profsvc.staticcheck.own_kernels import own_kernel_names
from profsvc.worker.correctness import kernel_base_name, own_kernels_ran

ROOT = Path(__file__).resolve().parents[2]
PLAN = JailPlan(
    bwrap="/usr/bin/bwrap",
    system=(Path("/usr"), Path("/tmp/site")),
    hidden_dirs=(Path("/srv/state"),),
    hidden_files=(Path("/srv/code/token"),),
    readonly=(Path("/srv/state/cache"),),
    writable=(Path("/srv/state/cells/c1"),),
    workdir=Path("/srv/state/cells/c1"),
    seccomp_fd=7,
)


def _position(argv: list[str], *items: str) -> int:
    for index in range(len(argv) - len(items) + 1):
        if argv[index : index + len(items)] == list(items):
            return index
    raise AssertionError(f"{items} not in {argv}")


def test_an_unprivileged_server_jails_in_a_user_namespace_with_no_capabilities():
    argv = bwrap_argv(PLAN, ["python", "-m", "x"])
    assert argv[0] == "/usr/bin/bwrap"
    assert "--unshare-all" in argv and _position(argv, "--cap-drop", "ALL")
    assert _position(argv, "--seccomp", "7") and "--die-with-parent" in argv and "--new-session" in argv
    assert argv[-4:] == ["--", "python", "-m", "x"]


def test_a_root_server_drops_to_the_jobs_user_inside_the_jail():
    plan = JailPlan(bwrap="/b", system=(Path("/usr"),), setpriv="/usr/bin/setpriv", uid=65534, gid=65534)
    argv = bwrap_argv(plan, ["python"])
    assert "--unshare-all" not in argv and "--unshare-pid" in argv and "--unshare-net" in argv
    tail = argv[argv.index("--") + 1 :]
    assert tail[:4] == ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    assert "--bounding-set=-all" in tail and tail[-1] == "python"


def test_mount_order_hides_then_exposes_and_tmp_comes_before_trees_under_it():
    argv = bwrap_argv(PLAN, ["true"])
    tmp = _position(argv, "--tmpfs", "/tmp")
    assert tmp < _position(argv, "--ro-bind", "/tmp/site", "/tmp/site")
    hidden = _position(argv, "--tmpfs", "/srv/state")
    assert hidden < _position(argv, "--ro-bind", "/srv/state/cache", "/srv/state/cache")
    assert hidden < _position(argv, "--bind", "/srv/state/cells/c1", "/srv/state/cells/c1")
    assert _position(argv, "--ro-bind", "/dev/null", "/srv/code/token")
    # The host's /sys only read-only (hwloc's topology), never writable.
    assert _position(argv, "--ro-bind-try", "/sys", "/sys") < _position(argv, "--tmpfs", "/sys/fs/cgroup")
    assert not any(argv[i] in ("--bind", "--dev-bind") and argv[i + 2] == "/sys" for i in range(len(argv) - 2))
    # Folders leading to a mount are made readable by the job's user (bubblewrap's own would be 0700), those
    # under /tmp in its tmpfs, not before it (where it would hide them).
    assert _position(argv, "--perms", "0755", "--dir", "/srv")
    assert tmp < _position(argv, "--perms", "0755", "--dir", "/tmp")


def test_the_cache_index_refuses_a_changed_or_planted_entry(tmp_path):
    index = BuildCacheIndex(tmp_path / "cache", tmp_path / "index")
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "ext.so").write_bytes(b"genuine")
    assert index.install(staged, "key1", ["ext.so"])
    assert index.verified("key1")
    (tmp_path / "cache" / "key1" / "ext.so").write_bytes(b"poison!")  # same size: the hash decides
    assert not index.verified("key1")
    planted = tmp_path / "cache" / "key2"
    planted.mkdir()
    (planted / "ext.so").write_bytes(b"never built here")
    assert not index.verified("key2")
    index.sweep()
    assert not planted.exists()


def test_a_staged_build_holding_a_link_is_not_installed(tmp_path):
    index = BuildCacheIndex(tmp_path / "cache", tmp_path / "index")
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "ext.so").symlink_to("/etc/passwd")
    assert not index.install(staged, "key", ["ext.so"])
    assert not (tmp_path / "cache" / "key").exists()


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({"name": "ok; rm -rf /", "cpp_sources": ""}, "identifier"),
        ({"name": "e", "cpp_sources": 3}, "cpp_sources"),
        ({"name": "e", "extra_cflags": "-O3"}, "extra_cflags"),
        ({"name": "e", "build_directory": "/srv"}, "unknown"),
        ({"name": "e", "with_cuda": "yes"}, "with_cuda"),
    ],
)
def test_a_build_request_that_is_not_load_inline_arguments_is_refused(arguments, complaint):
    with pytest.raises(BadBuildRequest, match=complaint):
        check_arguments(arguments)


@pytest.mark.parametrize("how", ["python -m", "empty search path entries"])
def test_the_folder_the_server_was_started_in_is_not_mounted_into_jobs(tmp_path, monkeypatch, how):
    started_in = tmp_path / "etc-like"
    started_in.mkdir()
    (started_in / "machine-id").write_text("the host's")
    monkeypatch.chdir(started_in)
    if how == "python -m":
        monkeypatch.setattr("sys.path", [str(started_in), *__import__("sys").path])
    else:
        monkeypatch.setenv("PYTHONPATH", "")
        monkeypatch.setenv("LD_LIBRARY_PATH", ":.:")
    trees, _ = readonly_trees()
    assert not any(tree == started_in or tree in started_in.parents for tree in trees), trees


def test_the_folders_that_name_the_hosts_network_interfaces_are_found_as_sysfs_lays_them_out(tmp_path):
    # sysfs: class/net/NAME is a link to the interface's folder under its device (devices/virtual/net/lo, a
    # PCI device's net/eth0); the folder above each is what names them all.
    sys_root = tmp_path / "sys"
    listing = sys_root / "class" / "net"
    listing.mkdir(parents=True)
    for device in ("devices/virtual/net/lo", "devices/virtual/net/ifb0", "devices/pci0000:00/0000:00:03.0/net/eth0"):
        (sys_root / device).mkdir(parents=True)
        (sys_root / device / "address").write_text("02:42:ac:11:00:02\n")
        (listing / Path(device).name).symlink_to(Path("../..") / device)
    outside = tmp_path / "elsewhere" / "net" / "odd"
    outside.mkdir(parents=True)
    (listing / "odd").symlink_to(outside)  # not a folder of this /sys: not one to cover
    assert network_folders(sys_root) == (
        listing,
        (sys_root / "devices/pci0000:00/0000:00:03.0/net").resolve(),
        (sys_root / "devices/virtual/net").resolve(),
    )
    assert network_folders(tmp_path / "no-sys") == ()


def test_each_jailed_process_covers_the_network_folders_there_are_when_it_starts(tmp_path, monkeypatch):
    # A folder gone since the server started (its interface removed) cannot be mounted over: bubblewrap would fail
    # every job. One that came since must be covered too.
    (tmp_path / "seccomp.bpf").write_bytes(b"")
    jail = Jail(PLAN, tmp_path / "seccomp.bpf", cgroups=None)
    argvs = []
    for folders in ((Path("/sys/class/net"), Path("/sys/devices/pci0/net")), (Path("/sys/class/net"),)):
        monkeypatch.setattr("profsvc.jail.host.network_folders", lambda folders=folders: folders)
        launch = jail.launch(["true"], writable=[tmp_path])
        launch.close()
        argvs.append(launch.argv)
    assert _position(list(argvs[0]), "--tmpfs", "/sys/devices/pci0/net") >= 0
    assert "/sys/devices/pci0/net" not in argvs[1] and "/sys/class/net" in argvs[1]


def test_only_plain_files_cross_between_cells(tmp_path):
    source, target = tmp_path / "a", tmp_path / "b"
    source.mkdir()
    target.mkdir()
    (source / "out-1.pt").write_bytes(b"x")
    (source / "link.pt").symlink_to("/etc/passwd")
    moved = move_files(["out-1.pt", "link.pt", "../escape", "/etc/passwd", 3], source, target)
    assert moved == ["out-1.pt"] and (target / "out-1.pt").is_file() and not (target / "link.pt").exists()


@pytest.mark.parametrize("swapped_for", ["link", "fifo", "folder"])
def test_a_file_swapped_between_the_check_and_the_move_does_not_cross(tmp_path, monkeypatch, swapped_for):
    source, target = tmp_path / "candidate", tmp_path / "judge"
    source.mkdir()
    target.mkdir()
    (source / "out-1.pt").write_bytes(b"x")
    replace = os.replace

    def swap_then_replace(src, dst):  # the sender's move in the window the relay leaves
        Path(src).unlink()
        {
            "link": lambda: Path(src).symlink_to("/etc/passwd"),
            "fifo": lambda: os.mkfifo(src),
            "folder": Path(src).mkdir,
        }[swapped_for]()
        replace(src, dst)

    monkeypatch.setattr("profsvc.scheduler.relay.os.replace", swap_then_replace)
    assert move_files(["out-1.pt"], source, target) == []
    assert not os.path.lexists(target / "out-1.pt")


def test_the_relay_pairs_commands_and_results_and_reports_a_candidate_that_died(tmp_path):
    async def scenario() -> tuple[dict, dict, dict]:
        relay = Relay()
        relay.judge_cell, relay.candidate_cell = tmp_path / "judge", tmp_path / "candidate"
        relay.judge_cell.mkdir()
        relay.candidate_cell.mkdir()
        (relay.judge_cell / "in-1.pt").write_bytes(b"inputs")
        candidate_asks = asyncio.ensure_future(relay.candidate_next({"op": "next"}))
        judge_asks = asyncio.ensure_future(
            relay.judge_command({"op": "candidate", "command": {"do": "call", "out": "out-1.pt"}, "files": ["in-1.pt"]})
        )
        command = await candidate_asks
        assert (relay.candidate_cell / "in-1.pt").is_file()
        (relay.candidate_cell / "out-1.pt").write_bytes(b"outputs")
        next_ask = asyncio.ensure_future(
            relay.candidate_next({"op": "next", "result": {"ok": True}, "files": ["out-1.pt"]})
        )
        answered = await judge_asks
        relay.candidate_ended(None)
        after = await relay.judge_command({"op": "candidate", "command": {"do": "call"}, "files": []})
        next_ask.cancel()
        return command, answered, after

    command, answered, after = asyncio.run(scenario())
    assert command == {"do": "call", "out": "out-1.pt"}
    assert answered == {"result": {"ok": True}, "files": ["out-1.pt"]}
    assert (tmp_path / "judge" / "out-1.pt").read_bytes() == b"outputs"
    assert after["gone"] is True


def test_the_candidate_can_send_the_judge_only_the_file_it_was_asked_for(tmp_path):
    # A forged status (or any file of the judge's) under its name would be moved over the judge's own.
    async def scenario() -> dict:
        relay = Relay()
        relay.judge_cell, relay.candidate_cell = tmp_path / "judge", tmp_path / "candidate"
        relay.judge_cell.mkdir()
        relay.candidate_cell.mkdir()
        listening = asyncio.ensure_future(relay.candidate_next({"op": "next"}))
        asked = {"do": "call", "out": "out-2.pt"}
        judge_asks = asyncio.ensure_future(relay.judge_command({"op": "candidate", "command": asked, "files": []}))
        await listening
        sent = ["correctness-status.json", "reference.py", "out-1.pt", "out-2.pt"]
        for name in sent:
            (relay.candidate_cell / name).write_text('{"ok": true, "stage": "running"}')
        next_ask = asyncio.ensure_future(relay.candidate_next({"op": "next", "result": {"ok": True}, "files": sent}))
        answered = await judge_asks
        next_ask.cancel()
        return answered

    answered = asyncio.run(scenario())
    assert answered["files"] == ["out-2.pt"]
    assert sorted(p.name for p in (tmp_path / "judge").iterdir()) == ["out-2.pt"]


def test_own_kernels_are_the_sources_global_triton_and_raw_kernels():
    source = (
        "@triton.autotune(configs=[\n    triton.Config({'BLOCK': 128}),\n], key=['n'])\n"
        "@triton.jit\ndef add_kernel(x):\n    pass\n"
        "@triton.jit(do_not_specialize=['n'])\ndef scale_kernel(x):\n    pass\n"
        'cuda = """\n'
        "__global__ void __launch_bounds__(256) relu_kernel(const float* x) {}\n"
        "template <typename T> __global__ void tiled(T* x) {}\n"
        '"""\n'
        "raw = cp.RawKernel(r'extern \"C\" __global__ void raw_add(float* x) {}', 'raw_add')\n"
        "named = cp.RawKernel(code, name='raw_named')\n"
    )
    names, vendor = own_kernel_names(source)
    expected = {"add_kernel", "scale_kernel", "relu_kernel", "tiled", "raw_add", "raw_named"}
    assert names == expected and not vendor
    launched = ["void tiled<float>(float*)", "void at::native::vectorized_elementwise_kernel<4>(int)"]
    assert kernel_base_name(launched[0]) == "tiled"
    assert own_kernels_ran(launched, set(names), vendor)
    assert not own_kernels_ran(launched[1:], set(names), vendor)
    assert own_kernels_ran(["sm90_xmma_gemm_f32f32_tf32f32"], set(), vendor=True)
    assert json.dumps(sorted(names))


def test_thrust_and_cub_kernels_are_the_candidates_own_but_torchs_wrapped_cub_is_not():
    # c30's thrust::sort launched these three on an H100 (CUB's radix sort); PyTorch's torch.sort launches the same
    # kernels from its wrapped namespace, as its traces name them.
    source = (ROOT / "tests" / "corpus" / "c30_sort_thrust.py").read_text()
    names, vendor = own_kernel_names(source)
    assert not names and vendor
    kernels = ("DeviceRadixSortHistogramKernel", "DeviceRadixSortExclusiveSumKernel", "DeviceRadixSortOnesweepKernel")

    def launched(cub: str) -> list[str]:
        return [f"void {cub}::{kernel}<{cub}::DeviceRadixSortPolicy<float>::Policy900>(float*)" for kernel in kernels]

    assert own_kernels_ran(launched("cub::CUB_300001_SM_900_NS"), set(names), vendor)
    assert not own_kernels_ran(launched("at_cuda_detail::cub"), set(names), vendor)
    assert not own_kernel_names("torch.sort(x)")[1]
