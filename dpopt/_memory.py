"""Freed heap memory handed back to the operating system between the release's stages.

glibc's allocator serves arrays below its mmap threshold (up to 32 MiB once larger blocks have been
freed) from the heap, and a heap whose top is held by one live block keeps every freed page below
it resident: after reading and aggregating 2·10⁷ records the process held ≈ 450 MiB of such pages,
and the estimate's n × n work came on top of them (tests/benchmarks/results/place_scale.md).
``malloc_trim(0)`` returns the free pages of every arena (Dask's workers call it for the same
reason). Memory only: no number a release publishes depends on it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from typing import Any

__all__ = ["trim_heap"]


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or None on another C library or platform."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # musl and others have no malloc_trim
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def trim_heap() -> bool:
    """Return the heap's free pages to the operating system (glibc ``malloc_trim(0)``); True where
    the C library has it, else nothing is done (False)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
