"""The published folder, written atomically (nothing is computed here).

Every file goes into a temporary folder beside ``out`` that is renamed into place only when
complete, so a failure leaves nothing behind and a reader never sees a half-written release; a
non-empty ``out`` is refused unless ``overwrite`` (then replaced in one rename, the old folder
removed only after the new one is in place). The folder gets the permissions of an ordinary
``mkdir`` (0777 minus the umask), not the 0700 of a temporary folder, so a web server can read a
release (issue 22 item 8).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._validation import DpoptInputError

__all__ = ["DIAGNOSTICS", "check_out", "write_atomically", "folder_mode"]

#: name of the sub-folder of ``out`` with files for the data holder only
DIAGNOSTICS = "diagnostics"


def _is_nonempty_dir(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


def folder_mode() -> int:
    """The mode ``mkdir`` would give a new folder: 0o777 minus the process umask."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o777 & ~mask


def check_out(out: Any, *, overwrite: bool = False) -> Path:
    """Validate the output folder before any work: a directory path, empty or absent unless
    ``overwrite``; its parent is created. Returns it as a Path."""
    if isinstance(out, bool) or not isinstance(out, (str, os.PathLike)) or not str(out):
        raise DpoptInputError(f"`out` must be a directory path; got {out!r}")
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise DpoptInputError(f"`out` must be a directory path; got {str(out)!r} (a file exists there)")
    if _is_nonempty_dir(path) and not overwrite:
        raise DpoptInputError(
            f"`out` must be an empty or new folder; got {str(out)!r} (not empty). Pass overwrite=True "
            "(CLI: --overwrite) to replace it"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise DpoptInputError(f"`out` must be a directory path; got {str(out)!r} (its parent is a file)") from None
    return path


def write_atomically(out: str | Path, write: Callable[[Path], dict[str, str]], *,
                     overwrite: bool = False) -> dict[str, Path]:
    """Run ``write(tmp)`` into a temporary folder beside ``out`` and rename it into place when
    complete (module doc). ``write`` returns key -> path relative to the folder; returns key ->
    path of every file written."""
    out = check_out(out, overwrite=overwrite)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    old: Path | None = None
    try:
        os.chmod(tmp, folder_mode())
        names = write(tmp)
        if out.exists():
            if _is_nonempty_dir(out):
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
                os.replace(out, old / "x")
            else:
                out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and (old / "x").exists() and not out.exists():
            os.replace(old / "x", out)  # put the previous release back
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return {k: out / v for k, v in names.items()}
