"""models/errata.md names real tests, covers E1-E14, and the docs cite nothing outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ERRATA = ROOT / "models" / "errata.md"


def test_every_named_test_exists():
    text = ERRATA.read_text().replace("`tss::", "`tests/test_seed_statements.py::")
    refs = re.findall(r"`(tests/[\w/]+\.py)::(test_\w+)", text)
    assert len(refs) > 40
    for path, name in refs:
        source = (ROOT / path).read_text()
        assert re.search(rf"^def {name}\b", source, flags=re.M), f"{path}::{name}"


def test_every_correction_has_a_section_with_a_call_and_a_test():
    text = ERRATA.read_text()
    for k in range(1, 15):
        m = re.search(rf"^### E{k}\. (.*?)(?=^### |^## )", text, flags=re.M | re.S)
        assert m, f"E{k}"
        body = m.group(1)
        assert "- call" in body and "test" in body, f"E{k}"


def test_no_reference_outside_the_repository():
    files = [ROOT / "README.md", *(ROOT / "models").glob("*.md"), *(ROOT / "examples").glob("*.py"),
             *(ROOT / "dpopt").rglob("*.py")]
    for path in files:
        text = path.read_text()
        assert "../shared" not in text and "shared/papers" not in text and "ERRATA.md" not in text, path
        assert "notes-001" not in text and "notes-003" not in text, path
