"""The example scripts: listed, self-contained (no files outside the repository), no forced back-end."""

from __future__ import annotations

import pytest

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def test_readme_lists_every_script_once():
    readme = (EXAMPLES / "README.md").read_text()
    listed = re.findall(r"^\| `([\w]+\.py)` \|", readme, flags=re.M)
    scripts = sorted(p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))
    assert sorted(listed) == scripts


def test_examples_read_nothing_outside_the_repository_and_force_no_backend():
    for path in EXAMPLES.glob("*.py"):
        text = path.read_text()
        assert "../shared" not in text and "shared/data" not in text, path
        assert "matplotlib.use(" not in text, path
        assert "parents[1] / \"..\"" not in text, path


def test_fresh_output_dir_never_reuses_a_folder(tmp_path):
    sys.path.insert(0, str(EXAMPLES))
    try:
        from _driver import fresh_output_dir, output_dir
    finally:
        sys.path.remove(str(EXAMPLES))
    a = fresh_output_dir("demo", tmp_path)
    b = fresh_output_dir("demo", tmp_path)
    assert a != b and a.is_dir() and b.is_dir() and b.name == "demo-output-2"
    assert output_dir(tmp_path / "given", "x.py") == tmp_path / "given"


@pytest.mark.slow
def test_figure_script_writes_to_a_fresh_folder_under_the_cwd(tmp_path):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, str(EXAMPLES / "figures_003.py"), "--runs", "4"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "figures_003-output"
    assert (folder / "003-fig1.png").is_file() and (folder / "003-fig5.notes.md").is_file()
