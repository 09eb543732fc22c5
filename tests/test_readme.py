"""The README's API tour runs as written (names are a contract: DESIGN.md)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_api_tour_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python block"
    namespace: dict = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)  # noqa: S102 - our own README
    exact, greedy = namespace["exact"], namespace["greedy"]
    assert exact.status == "optimal" and exact.gap == 0
    assert exact.degradation <= greedy.degradation
    assert namespace["r"].agrees()
    # the exported model, read back by HiGHS, has the optimum of the cvxpy model
    back = namespace["h"].getInfo().objective_function_value
    assert abs(back - namespace["problem"].solve_plan().error) <= 1e-7 * max(1.0, abs(back))
