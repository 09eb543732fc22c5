"""The published folder and its diagnostics, written atomically (nothing is computed here).

Two folders, never one inside the other:

* ``out``, the folder a user publishes, holds only files of :data:`PUBLISHED_FILES` (the one list
  of publishable files; :func:`write_atomically` refuses to put anything else there), with the
  permissions of an ordinary ``mkdir`` (0777 minus the umask) so a web server can read it;
* ``<out>.diagnostics`` (:func:`diagnostics_folder`), a sibling for the data holder only, owner-only
  (0700): files of :data:`DIAGNOSTIC_FILES` (raw user ids, value-dependent counts, timings). Writers
  put them into the sub-folder :data:`DIAGNOSTICS` of the temporary folder; they are moved out before
  anything is renamed into place.

Each folder is written into a temporary folder beside it and renamed into place only when complete,
so a failure leaves nothing behind and a reader never sees a half-written release. A non-empty
``out`` is refused unless ``overwrite``; even then only a folder a release wrote (its entries all in
the lists above) is replaced, so no input, nor a folder holding one, is ever removed; ``out`` may not
be the current folder or one above it, nor (:func:`check_out` with ``inputs``) hold an input or lie
inside an input folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .._validation import DpoptInputError

__all__ = ["DIAGNOSTICS", "PUBLISHED_FILES", "DIAGNOSTIC_FILES", "check_out", "diagnostics_folder",
           "is_diagnostic", "write_atomically", "folder_mode"]

#: every file a release may write into the folder a user publishes (and nothing else goes there)
PUBLISHED_FILES = frozenset({"release.csv", "answers.csv", "summary.json", "report.md", "report.html", "map.png",
                             "frontier.png", "release.geojson", "release.parquet"})

#: files for the data holder only, written to :func:`diagnostics_folder` (never published)
DIAGNOSTIC_FILES = frozenset({"timings.json", "ingest.json", "suppressed.csv", "kept_pairs.csv", "README.txt",
                              "diagnostics.json"})

#: the sub-folder of a writer's temporary folder whose files go to :func:`diagnostics_folder`
DIAGNOSTICS = "diagnostics"

#: suffix of the diagnostics folder's name: ``<out>.diagnostics``
_SUFFIX = ".diagnostics"


def _is_nonempty_dir(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


def folder_mode() -> int:
    """The mode ``mkdir`` would give a new folder: 0o777 minus the process umask."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o777 & ~mask


def diagnostics_folder(out: str | os.PathLike[str]) -> Path:
    """The data holder's folder beside ``out``: ``<out>.diagnostics`` (never inside ``out``)."""
    path = Path(os.path.abspath(out))
    return path.with_name(path.name + _SUFFIX)


def is_diagnostic(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (a file a release wrote) is in a diagnostics folder (not for publication)."""
    parent = Path(path).parent.name
    return parent.endswith(_SUFFIX) or parent == DIAGNOSTICS


def _foreign(path: Path, allowed: frozenset[str]) -> str | None:
    """The first entry of folder ``path`` a release did not write, or None (a legacy
    ``diagnostics/`` sub-folder of diagnostic files counts as written)."""
    for entry in sorted(path.iterdir()):
        if entry.is_file() and not entry.is_symlink() and entry.name in allowed:
            continue
        if entry.name == DIAGNOSTICS and entry.is_dir() and _foreign(entry, DIAGNOSTIC_FILES) is None:
            continue
        return entry.name
    return None


#: what the longest name a release makes beside ``out`` adds to its name:
#: ``.<name>.diagnostics.partial-`` and :func:`tempfile.mkdtemp`'s 8 random characters
_TEMP_EXTRA = len("..diagnostics.partial-") + 8


def _resolved(path: Path, what: str) -> Path:
    """``path.resolve()``, or a one-line error naming the argument (``what``): a symlink loop
    (RuntimeError before Python 3.13, OSError after) or a name the file system refuses."""
    try:
        return path.resolve()
    except (OSError, RuntimeError) as exc:
        raise DpoptInputError(f"{what} must be a path the file system can resolve; got {str(path)!r} ({exc})") from None


def _check_name_length(path: Path) -> None:
    """``out``'s name leaves room for the folders written beside it (:data:`_TEMP_EXTRA`), so that a
    long name is refused before the release is computed rather than when it is written."""
    parent = path.parent if str(path.parent) else Path(".")
    try:
        name_max = os.pathconf(parent, "PC_NAME_MAX")
    except (OSError, ValueError):  # the parent does not exist yet (it is created), or no such limit
        name_max = 255
    size = len(os.fsencode(path.name))
    if size + _TEMP_EXTRA > name_max:
        raise DpoptInputError(f"`out` must have a name of at most {name_max - _TEMP_EXTRA} bytes (the release writes "
                              f"<name>.diagnostics and temporary folders beside it); got a name of {size} bytes: "
                              f"{path.name[:40]!r}…")


def _check_inputs(path: Path, inputs: Iterable[Any]) -> None:
    """``out`` must not be, nor hold, an input, nor lie inside an input folder."""
    here = _resolved(path, "`out`")
    for given in inputs:
        if given is None or (isinstance(given, str) and ("://" in given or "*" in given)):
            continue
        src = _resolved(Path(given), "each input (the records, the partition list)")
        if here == src or here in src.parents:
            raise DpoptInputError(f"`out` must not hold the input; got {str(path)!r}, which holds {str(given)!r}")
        if src.is_dir() and src in here.parents:
            raise DpoptInputError(f"`out` must not lie inside the input folder {str(given)!r}; got {str(path)!r}")


def check_out(out: Any, *, overwrite: bool = False, inputs: Iterable[Any] = ()) -> Path:
    """Validate the output folder before any work (module doc): a directory path, empty or absent
    unless ``overwrite`` (then a folder a release wrote), not a symbolic link, not the current folder
    nor above it, not holding nor inside one of ``inputs``; its parent is created. Returns it as a Path."""
    if isinstance(out, bool) or not isinstance(out, (str, os.PathLike)) or not str(out):
        raise DpoptInputError(f"`out` must be a directory path; got {out!r}")
    path = Path(out)
    _check_name_length(path)
    here = _resolved(path, "`out`")
    if path.is_symlink():  # the folder is renamed into place: a link would be replaced, not followed
        raise DpoptInputError(f"`out` must be a folder, not a symbolic link; got {str(out)!r} (a link to "
                              f"{str(here)!r}): give the folder itself")
    if path.exists() and not path.is_dir():
        raise DpoptInputError(f"`out` must be a directory path; got {str(out)!r} (a file exists there)")
    diag = diagnostics_folder(path)
    if diag.exists() and not diag.is_dir():
        raise DpoptInputError(f"`out` {str(out)!r} needs its diagnostics folder {str(diag)!r}, where a file exists: "
                              "move that file or choose another folder")
    if here == Path.cwd().resolve() or here in Path.cwd().resolve().parents or here.parent == here:
        raise DpoptInputError(f"`out` must be a new folder, not the current folder or one above it; got {str(out)!r}")
    _check_inputs(path, inputs)
    fresh = not _is_nonempty_dir(path)  # then a left-over diagnostics folder of a removed release may go
    for folder, allowed in ((path, PUBLISHED_FILES), (diagnostics_folder(path), DIAGNOSTIC_FILES)):
        if not _is_nonempty_dir(folder):
            continue
        if not overwrite and not (fresh and folder != path and _foreign(folder, allowed) is None):
            raise DpoptInputError(
                f"`out` must be an empty or new folder; got {str(out)!r} ({str(folder)!r} is not empty). Pass "
                "overwrite=True (CLI: --overwrite) to replace a previous release")
        other = _foreign(folder, allowed)
        if other is not None:
            raise DpoptInputError(
                f"`out` {str(out)!r} is not a previous release: {str(folder)!r} holds {other!r}, which a release "
                "does not write; overwrite replaces only a release folder: choose another folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise DpoptInputError(f"`out` must be a directory path; got {str(out)!r} (its parent is a file)") from None
    return path


def _split_diagnostics(tmp: Path, diag: Path) -> Path | None:
    """Move the files of ``tmp``/diagnostics into a new owner-only temporary folder beside
    ``diag``; check that ``tmp`` holds only published files. Returns the folder (None: none)."""
    sub = tmp / DIAGNOSTICS
    dtmp = None
    if sub.is_dir():
        dtmp = Path(tempfile.mkdtemp(prefix=f".{diag.name}.partial-", dir=diag.parent))  # 0700
        for entry in sorted(sub.iterdir()):
            if entry.name not in DIAGNOSTIC_FILES or not entry.is_file():
                raise RuntimeError(f"a writer put {entry.name!r} in the diagnostics; add it to DIAGNOSTIC_FILES")
            os.replace(entry, dtmp / entry.name)
        sub.rmdir()
    other = _foreign(tmp, PUBLISHED_FILES)
    if other is not None:  # a writer's bug: never publish a file that is not on the list
        raise RuntimeError(f"a writer put {other!r} in the published folder; it is not in PUBLISHED_FILES")
    return dtmp


def _swap(new: Path, dest: Path) -> Path | None:
    """Rename ``new`` to ``dest``, the previous ``dest`` kept aside; returns where (None: none)."""
    old = None
    if dest.exists():
        if _is_nonempty_dir(dest):
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
            os.replace(dest, old / "x")
        else:
            dest.rmdir()
    os.replace(new, dest)
    return old


def _restore(old: Path | None, dest: Path) -> None:
    """Undo :func:`_swap`: remove the new ``dest`` and put the previous folder back."""
    shutil.rmtree(dest, ignore_errors=True)
    if old is not None and (old / "x").exists():
        os.replace(old / "x", dest)
        shutil.rmtree(old, ignore_errors=True)


def write_atomically(out: str | Path, write: Callable[[Path], dict[str, str]], *,
                     overwrite: bool = False) -> dict[str, Path]:
    """Run ``write(tmp)`` into a temporary folder beside ``out``, move its ``diagnostics/`` files to
    :func:`diagnostics_folder`, and rename both into place when complete (module doc). ``write``
    returns key -> path relative to the folder; returns key -> path of every file written."""
    out = check_out(out, overwrite=overwrite)
    diag = diagnostics_folder(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    dtmp: Path | None = None
    swapped: list[tuple[Path | None, Path]] = []
    try:  # the folder stays 0700 (mkdtemp's) while it holds the diagnostics, opened once they left it
        names = write(tmp)
        dtmp = _split_diagnostics(tmp, diag)
        os.chmod(tmp, folder_mode())
        swapped.append((_swap(tmp, out), out))
        if dtmp is not None:
            swapped.append((_swap(dtmp, diag), diag))
    except BaseException:
        for path in (tmp, dtmp):
            if path is not None and path.exists():
                shutil.rmtree(path, ignore_errors=True)
        for old, dest in reversed(swapped):
            _restore(old, dest)
        raise
    for old, _ in swapped:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    prefix = DIAGNOSTICS + "/"
    return {k: diag / v[len(prefix):] if v.startswith(prefix) else out / v for k, v in names.items()}
