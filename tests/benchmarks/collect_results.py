"""Collect tests/benchmarks/results/*.md into tests/benchmarks/RESULTS.md.

Each benchmark script writes (or its author pastes) its latest figures into
``results/<area>.md``; this script assembles the single results page the issues refer to.
Run: python tests/benchmarks/collect_results.py
"""

from __future__ import annotations

from pathlib import Path

ORDER = ["foundation", "clipping", "arrays", "suppression", "reproduce", "release"]


def main() -> None:
    here = Path(__file__).parent
    parts = {p.stem: p for p in (here / "results").glob("*.md")}
    names = [n for n in ORDER if n in parts] + sorted(set(parts) - set(ORDER))
    lines = [
        "# Benchmark results",
        "",
        "Measured on the project's 2-core, 24 GiB machine (often shared with other jobs, so",
        "timings vary by up to 2x). Each section comes from `results/<area>.md`, written by",
        "`bench_<area>.py`; regenerate this page with `python tests/benchmarks/collect_results.py`.",
        "",
    ]
    for name in names:
        text = parts[name].read_text().strip()
        lines += [f"<!-- from results/{name}.md -->", text, ""]
    (here / "RESULTS.md").write_text("\n".join(lines))
    print(f"wrote {here / 'RESULTS.md'} from {len(names)} sections: {', '.join(names)}")


if __name__ == "__main__":
    main()
