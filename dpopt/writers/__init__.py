"""Layer 4 — writers: the published folder (csv, json, report.md, map.png, frontier.png; only the
files of :data:`.folder.PUBLISHED_FILES`) and its owner-only sibling ``<out>.diagnostics/``, written
atomically (:mod:`.folder`). Nothing is computed here.

* :func:`write_release` — either model's result into a folder (dispatch on its type);
* :mod:`.user` — the ``user`` model's table, summary and files;
* :mod:`.public_occupancy` — the ``public-occupancy`` model's files, map and frontier.

Hook for the report writers (report.html, figures, console):
:func:`dpopt.writers.hooks.extra_files`, called by both writers inside the temporary folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .folder import DIAGNOSTICS, check_out, folder_mode, write_atomically
from .hooks import extra_files

__all__ = ["write_release", "extra_files", "check_out", "write_atomically", "folder_mode", "DIAGNOSTICS"]


def write_release(result: Any, out: str | Path, *, make_map: bool = True, overwrite: bool = False,
                  unit: str | None = None) -> dict[str, Path]:
    """Write ``result`` (a :class:`~dpopt.writers.user.UserRelease` or a
    :class:`~dpopt.writers.public_occupancy_result.ReleaseResult`) into folder ``out`` atomically; returns
    key -> path of every file. ``unit`` labels the values in summary.json and report.html."""
    from .user import UserRelease, write_user_release

    if isinstance(result, UserRelease):
        return write_user_release(result, out, overwrite=overwrite, make_map=make_map, unit=unit)
    from .public_occupancy import write_report

    return write_report(result, out, make_map=make_map, overwrite=overwrite, unit=unit)
