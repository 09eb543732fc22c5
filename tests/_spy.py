"""One test helper: record the first argument of every call to a function, still calling it."""

from __future__ import annotations

from typing import Any


def record_calls(monkeypatch: Any, owner: Any, name: str) -> list[Any]:
    """Replace ``owner.name`` (module or object) by a wrapper that appends its first argument to
    the returned list and then calls the original; pytest's ``monkeypatch`` restores it."""
    calls: list[Any] = []
    real = getattr(owner, name)

    def wrapper(first, *args, **kwargs):
        calls.append(first)
        return real(first, *args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls
