"""The automatic KV budget: a share of what the process may use, from the cgroup or the RAM."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.engine.batch.kv_budget import (
    MIB,
    Memory,
    auto_budget_mib,
    cgroup_limit,
    describe,
    meminfo,
    usable_memory,
)

pytestmark = pytest.mark.unit
GIB = 1024 * MIB


def test_a_quarter_of_a_24_gib_machine_holds_a_1b_model_s_whole_context_in_8_slots() -> None:
    budget = auto_budget_mib(Memory(24 * GIB, 22 * GIB, "RAM"))
    assert budget == 6 * 1024
    llama_1b_fp32 = 16 * 8 * 64 * 2 * 4  # layers x KV heads x head size x (K, V) x bytes
    assert budget * MIB >= 8 * 8192 * llama_1b_fp32


def test_workers_split_it_and_what_is_available_caps_it() -> None:
    assert auto_budget_mib(Memory(24 * GIB, 22 * GIB, "RAM"), workers=4) == 6 * 1024 / 4
    assert auto_budget_mib(Memory(24 * GIB, 4 * GIB, "RAM")) == 2 * 1024  # half of what is left
    assert auto_budget_mib(Memory(0, 0, "cgroup")) == 1.0  # never nothing


def _cgroups(tmp_path: Path, listing: str, files: dict[str, str]) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    proc = tmp_path / "proc-cgroup"
    proc.write_text(listing)
    return root, proc


def test_cgroup_v2_takes_the_tightest_limit_on_the_group_s_path(tmp_path: Path) -> None:
    root, proc = _cgroups(
        tmp_path,
        "0::/pod/app\n",
        {"pod/memory.max": f"{8 * GIB}\n", "pod/app/memory.max": "max\n"},
    )
    assert cgroup_limit(root, proc) == 8 * GIB


def test_cgroup_v1_reads_the_memory_controller_s_group(tmp_path: Path) -> None:
    root, proc = _cgroups(
        tmp_path,
        "4:memory:/docker/abc\n3:cpu:/docker/abc\n",
        {
            "memory/memory.limit_in_bytes": "9223372036854771712\n",  # v1's "no limit"
            "memory/docker/abc/memory.limit_in_bytes": f"{2 * GIB}\n",
        },
    )
    assert cgroup_limit(root, proc) == 2 * GIB


def test_no_cgroup_no_limit(tmp_path: Path) -> None:
    root, proc = _cgroups(tmp_path, "0::/\n", {"memory.max": "max\n"})
    assert cgroup_limit(root, proc) is None
    assert cgroup_limit(root, tmp_path / "missing") is None


def test_meminfo_fields_are_bytes(tmp_path: Path) -> None:
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:       24684096 kB\nMemAvailable:   23467432 kB\n")
    assert meminfo("MemTotal", info) == 24684096 * 1024
    assert meminfo("Nothing", info) is None


def test_this_machine_s_memory_is_read_and_described() -> None:
    memory = usable_memory()
    assert 0 < memory.available <= memory.limit
    text = describe(memory, 2)
    assert "25%" in text and "2 workers" in text and memory.source in text
