"""trim_heap (dpopt/_memory.py): freed heap pages go back to the operating system."""

from __future__ import annotations

import sys

import dpopt._memory as memory


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def test_freed_heap_pages_are_returned():
    """200 MB of small blocks (heap, below any mmap threshold) of which every tenth stays live: the
    freed ones between them stay resident (the heap cannot shrink from its top) until trim_heap
    returns their pages (glibc; this is the CI's C library)."""
    assert sys.platform.startswith("linux")
    blocks = [bytearray(b"\x01" * 100_000) for _ in range(2_000)]  # each page touched
    live = blocks[::10]
    del blocks
    before = _rss_mib()
    assert memory.trim_heap() is True
    after = _rss_mib()
    assert before - after > 100, (before, after)
    assert all(b[0] == 1 and b[-1] == 1 for b in live)


def test_without_malloc_trim_nothing_is_done(monkeypatch):
    monkeypatch.setattr(memory, "_malloc_trim", lambda: None)
    assert memory.trim_heap() is False
