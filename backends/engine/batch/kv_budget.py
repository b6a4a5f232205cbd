"""The batch engine's KV memory budget when none is set (``GENAI_KV_CACHE_MIB=auto``, the
default): a share of the memory this process may use, split among the server's worker
processes.

The memory a process may use is the least of the machine's RAM and its control group's limit
(a container's ``--memory``, a Kubernetes pod's limit; cgroup v2 ``memory.max`` or v1
``memory.limit_in_bytes``). A quarter of it goes to the KV cache, the rest stays for the
weights (a 1B model in int4 holds about 1 GB), the RAM prefix store, the runtime's own
buffers and the machine. A budget is never taken beyond what half the memory still available
at load time holds, so a second model loaded later, or workers starting together, cannot
reserve what is not there. The budget is a most: the slots hold no more than the model's
context (``kv_cache.capacity_for``), so a small model reserves what it needs.

On a 24 GiB machine with one worker the share is 6 GiB: a 1B model of Llama 3.2's shape (64
KiB of fp32 KV a token) holds its whole 8,192-token context in each of 8 slots (4 GiB).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024
SHARE = 0.25  # of the memory this process may use
AVAILABLE_SHARE = 0.5  # of the memory available when the model loads, at most
# Where the control groups are mounted, and where this process's own are listed.
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True)
class Memory:
    """What this process may use (``limit``), what is available now, and where the limit
    comes from ("RAM" or "cgroup"), in bytes."""

    limit: int
    available: int
    source: str


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" (v2): no limit


def cgroup_limit(root: Path = CGROUP_ROOT, listing: Path = PROC_CGROUP) -> int | None:
    """This process's memory limit set by its control group (the tightest on its path up to
    the root), if any; v1's "no limit" is a huge number, which the RAM then undercuts."""
    try:
        lines = listing.read_text().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: 0::/path
            base, name = root, "memory.max"
        elif "memory" in controllers.split(","):
            base, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        # Inside a container the group's own folder is often mounted as the root itself.
        parts = Path(path.lstrip("/")).parts
        for depth in range(len(parts), -1, -1):
            limit = _read_int(base.joinpath(*parts[:depth]) / name)
            if limit is not None:
                limits.append(limit)
    return min(limits) if limits else None


def meminfo_fields(path: Path = MEMINFO) -> dict[str, int]:
    """``/proc/meminfo``'s fields in bytes (``MemTotal``, ``MemAvailable``, ...)."""
    fields = {}
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(":")
            if value.split()[1:] == ["kB"] and value.split()[0].isdigit():
                fields[name] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return fields


def meminfo(field: str, path: Path = MEMINFO) -> int | None:
    """One ``/proc/meminfo`` field in bytes."""
    return meminfo_fields(path).get(field)


def usable_memory() -> Memory:
    """The memory this process may use, and what is available of it now."""
    info = meminfo_fields()
    ram = info.get("MemTotal")
    if ram is None:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit, source = ram, "RAM"
    cgroup = cgroup_limit()
    if cgroup is not None and cgroup < ram:
        limit, source = cgroup, "cgroup"
    available = info.get("MemAvailable")
    return Memory(limit, min(limit, available if available is not None else limit), source)


def auto_budget_mib(memory: Memory, workers: int = 1) -> float:
    """The KV budget, in MiB, of one model in one of ``workers`` processes."""
    share = min(SHARE * memory.limit, AVAILABLE_SHARE * memory.available)
    return max(1.0, share / max(1, workers) / MIB)


def describe(memory: Memory, workers: int) -> str:
    """How the automatic budget was reached, for the start-up log."""
    per = f", split among {workers} workers" if workers > 1 else ""
    return (
        f"{SHARE:.0%} of the {memory.limit / 2**30:.1f} GiB this process may use "
        f"({memory.source}; {memory.available / 2**30:.1f} GiB available){per}"
    )
