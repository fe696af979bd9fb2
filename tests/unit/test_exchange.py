"""Tensors between the judge and the candidate's process (profsvc.worker.exchange), on the CPU."""

from __future__ import annotations

from pathlib import Path

import torch

from profsvc.worker.exchange import load, save, take


def _mapped_from(address: int, path: Path) -> bool:
    """Whether the address lies in a mapping of the file (its name since removed)."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        span, *_, name = line.split(maxsplit=5)
        start, end = (int(part, 16) for part in span.split("-"))
        if start <= address < end and name.removesuffix(" (deleted)") == str(path):
            return True
    return False


def _value() -> list[object]:
    return [torch.arange(1 << 20, dtype=torch.float32), (torch.ones(3, dtype=torch.int64), 0.5), "mean", 7]


def test_what_the_judge_hands_over_is_mapped_not_read_and_its_file_is_gone(tmp_path: Path):
    path = tmp_path / "in-1.pt"
    save(path, _value(), torch)
    value = take(path, torch)
    assert not path.exists()
    assert torch.equal(value[0], _value()[0]) and torch.equal(value[1][0], torch.ones(3, dtype=torch.int64))
    assert value[1][1] == 0.5 and value[2:] == ["mean", 7]
    # Backed by the file, not by a copy in memory: the name is gone, the mapping stays.
    assert _mapped_from(value[0].data_ptr(), path)
    # Writable as any input: a kernel of the candidate may write into one (the judge then sees that).
    value[0].zero_()
    assert value[0].sum() == 0


def test_what_the_candidate_sends_the_judge_reads_whole(tmp_path: Path):
    path = tmp_path / "out-1.pt"
    save(path, {"outputs": [torch.full((4,), 2.0)]}, torch)
    value = load(path, torch)
    assert not _mapped_from(value["outputs"][0].data_ptr(), path)
    assert torch.equal(value["outputs"][0], torch.full((4,), 2.0))
