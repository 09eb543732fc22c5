"""Collect tests/benchmarks/results/*.md into tests/benchmarks/RESULTS.md.

Each benchmark script writes (or its author pastes) its latest figures into
``results/<area>.md``; this script assembles the single results page the issues refer to.
Run: python tests/benchmarks/collect_results.py
"""

from __future__ import annotations

from pathlib import Path

#: sections in reading order (the core tools, then records, noise, planning, release and accuracy);
#: any other results/*.md follows alphabetically, so a new benchmark is never left out
ORDER = ["engine", "foundation", "clipping", "arrays", "suppression", "sweep", "verify", "reproduce", "scale",
         "sample_bias", "samplers", "refine", "sampler_exactness", "budget", "city", "release", "userdp", "gaussian", "hierarchy",
         "multires", "goal_ratio", "node_floor", "report"]


def kept_notes(path: Path) -> list[str]:
    """The hand-written notes of a results page that a benchmark rewrites: its paragraphs opening in
    bold (a rerun's date and what changed) before its first section, each followed by a blank line;
    the benchmark's writer puts them back after its own preamble. [] where the page does not exist."""
    if not path.exists():
        return []
    head = path.read_text(encoding="utf-8").split("\n## ", 1)[0]
    return [line for para in head.split("\n\n") if para.startswith("**") for line in (para.strip(), "")]


def main() -> None:
    here = Path(__file__).parent
    parts = {p.stem: p for p in (here / "results").glob("*.md")}
    names = [n for n in ORDER if n in parts] + sorted(set(parts) - set(ORDER))
    lines = [
        "# Benchmark results",
        "",
        "Machine: one shared box with **2 cores** and 24 GiB, used at the same time by about eight",
        "engineers' jobs (load averages of 2 to 10 during the runs), so an absolute time can move by 2x",
        "or more between runs. **The ratios are the results** (dpopt against a floor or reference",
        "measured in the same run, or before/after on the same data); seconds and MiB are notes.",
        "Each section comes from `results/<area>.md`, written by `bench_<area>.py` (its header says how",
        "it was run); regenerate this page with `python tests/benchmarks/collect_results.py`.",
        "",
        "Sections: " + ", ".join(f"[{n}](results/{n}.md)" for n in names) + ".",
        "",
    ]
    for name in names:
        text = parts[name].read_text().strip()
        lines += [f"<!-- from results/{name}.md -->", text, ""]
    (here / "RESULTS.md").write_text("\n".join(lines))
    print(f"wrote {here / 'RESULTS.md'} from {len(names)} sections: {', '.join(names)}")


if __name__ == "__main__":
    main()
