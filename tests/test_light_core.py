"""The models run on the light install (``pip install dpopt`` without the ``release`` extra).

A child interpreter blocks pandas, h3, h3ronpy, tqdm and matplotlib with a ``sys.meta_path``
finder that raises ImportError for them (as if they were not installed), then runs the three
models, their custom problems and the CLI's reading of counts and occupancy files.
"""

from __future__ import annotations

import pytest

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent('''
    import importlib.abc, sys
    BLOCKED = {"pandas", "h3", "h3ronpy", "tqdm", "matplotlib"}

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"No module named {name!r} (blocked)")

    sys.meta_path.insert(0, Block())
    import cvxpy as cp
    import numpy as np
    import dpopt

    counts = [3, 1, 7, 2, 9, 4]
    plan = dpopt.optimal_clipping(counts, 1.0, 1.0)
    lp = dpopt.solve_clipping(counts, 1.0, 1.0)
    assert abs(plan.error - lp.error) < 1e-9
    prob = dpopt.clipping_problem(counts, 1.0, 1.0)
    assert abs(prob.solve_plan().error - plan.error) < 1e-7
    arr = dpopt.optimal_array_length(counts, 1.0, 1.0)
    ap = dpopt.array_length_problem(counts, 1.0, 1.0)
    assert ap.with_constraints(ap.length <= 5).solve_plan().length <= 5
    occ = dpopt.Occupancy.from_triples([f"u{i % 9}" for i in range(80)], [f"g{i % 5}" for i in range(80)],
                                       [1 + i % 4 for i in range(80)])
    sp = dpopt.solve_suppression(occ, 1.0, 1.0, time_limit=60)
    gp = dpopt.clip_user(occ, 1.0, 1.0)
    assert sp.degradation <= gp.degradation
    sq = dpopt.suppression_problem(occ, 1.0, 1.0)
    sq.with_constraints(cp.sum(sq.suppress) <= 2).solve_plan()
    from dpopt.cli.suppress import read_occupancy
    from dpopt.cli import main
    assert main(["clipping", "--counts", sys.argv[1], "--bound", "1", "--epsilon", "1", "--json"]) == 0
    assert read_occupancy(sys.argv[2]).n_users == 2
    for name in BLOCKED:
        assert name not in sys.modules, name
    print("light core ok")
''')


@pytest.mark.slow
def test_the_models_run_without_the_release_extra(tmp_path):
    counts = tmp_path / "counts.csv"
    counts.write_text("user,count\na,3\nb,7\nc,2\n")
    occ = tmp_path / "occ.csv"
    occ.write_text("user,grid,count\n1,g1,3\n2,g1,4\n1,g2,2\n")
    out = subprocess.run([sys.executable, "-c", CHILD, str(counts), str(occ)], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "light core ok" in out.stdout


def test_the_core_dependencies_leave_out_the_release_pipeline():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {d.split(">")[0].split("=")[0].split("[")[0] for d in meta["dependencies"]}
    assert core == {"numpy", "scipy", "cvxpy", "highspy", "networkx"}
    release = {d.split(">")[0] for d in meta["optional-dependencies"]["release"]}
    assert {"pandas", "h3", "h3ronpy", "tqdm", "matplotlib"} <= release
    assert release <= {d.split(">")[0] for d in meta["optional-dependencies"]["test"]}
