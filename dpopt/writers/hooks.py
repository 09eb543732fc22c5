"""HOOK for the report writers of issue 23 (report.html, figures.py, console.py): the files they
add to a release folder. Both folder writers call :func:`extra_files` inside the temporary folder,
before it is renamed into place, so the added files are written atomically with the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["extra_files"]


def extra_files(result: Any, tmp: Path) -> dict[str, str]:
    """Write the report writers' files for ``result`` (a UserRelease or a ReleaseResult) into
    ``tmp``; returns key -> path relative to ``tmp``. Empty until dpopt/writers/html.py lands."""
    return {}
