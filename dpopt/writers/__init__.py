"""Layer 4 — writers: the published folder (csv, json, report.md, map.png, frontier.png; only the
files of :data:`.folder.PUBLISHED_FILES`) and its owner-only sibling ``<out>.diagnostics/``, written
atomically (:mod:`.folder`). Nothing is computed here.

* :class:`~.result.Release` — the one result of both privacy models, and release.csv's one schema;
* :func:`~.release_folder.write_release` — its folder (one writer; report.md by :mod:`.report_md`);
* :mod:`.user`, :mod:`.public_occupancy_result` — each model's table and summary, formatted from its
  Measurements and Estimates; :mod:`.public_occupancy` — that model's exact budget texts and pairs.

Hook for the report writers (report.html, figures, console):
:func:`dpopt.writers.hooks.extra_files`, called by the writer inside the temporary folder.
"""

from __future__ import annotations

from .folder import DIAGNOSTICS, check_out, folder_mode, write_atomically
from .hooks import extra_files
from .release_folder import write_release
from .result import ANSWER_COLUMNS, RELEASE_COLUMNS, Release

__all__ = ["Release", "RELEASE_COLUMNS", "ANSWER_COLUMNS", "write_release", "extra_files", "check_out", "write_atomically", "folder_mode", "DIAGNOSTICS"]
