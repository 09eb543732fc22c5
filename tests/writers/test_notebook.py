"""examples/release_notebook.py runs as a script (jupytext percent format) and leaves the report,
the figure and a folder whose published files the report was rendered from."""

from __future__ import annotations

import pytest

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_release_notebook_runs(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DPOPT_OUT": str(tmp_path), "DPOPT_OPEN_REPORT": "0",
           "MPLBACKEND": "Agg"}
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "release_notebook.py")], capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "release" / "report.html").read_text(encoding="utf-8")
    rel = pd.read_csv(tmp_path / "release" / "release.csv")
    rel = rel[rel["released"]]
    assert len(rel) > 0
    assert all(c in page for c in rel["cell"])
    assert (tmp_path / "means_vs_counts.png").read_bytes()[:4] == b"\x89PNG"
    assert "# %%" in (ROOT / "examples" / "release_notebook.py").read_text()
