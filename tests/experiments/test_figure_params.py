"""Figure parameters: every one settable, recorded, shown in titles/notes; honest error bars."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpopt.experiments import FIGURES, figure_parameters, reproduce
from dpopt.experiments.base import dataset_unit_mean, figure_title
from dpopt.experiments.outputs import write_outputs

ROOT = Path(__file__).resolve().parents[2]


def test_unknown_parameter_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"gama is not a parameter of 002-fig3; valid: .*gamma"):
        reproduce("002-fig3", runs=1, gama=4)


def test_cli_unknown_parameter_is_one_line_exit_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "dpopt", "reproduce", "002-fig3", "--out", str(tmp_path),
                          "--param", "gama=4"], capture_output=True, text=True, env=env)
    assert out.returncode == 2
    err = out.stderr.strip()
    assert "\n" not in err and "valid keys" in err and "gamma" in err and "q" in err


def test_every_seed002_synthetic_parameter_is_settable_and_shown(tmp_path):
    params = figure_parameters("002-fig4")
    assert {"gamma", "q", "bound", "epsilons", "n_grids"} <= set(params) and params["gamma"] == 6.0
    r = reproduce("002-fig4", runs=1, gamma=2.5, q=0.05, bound=80.0, epsilons=[0.5, 1.0])
    assert r.params["gamma"] == 2.5 and r.params["q"] == 0.05 and r.params["bound"] == 80.0
    assert r.params["epsilons"] == [0.5, 1.0]
    assert set(r.changed) == {"gamma", "q", "bound", "epsilons", "runs"}
    title = figure_title(FIGURES["002-fig4"], {**r.params, "_changed": r.changed})
    assert "γ = 2.5" in title and "q = 0.05" in title and "bound = 80" in title
    assert "γ = 6" not in title and "q = 0.01" not in title
    paths = write_outputs(r, tmp_path)
    notes = paths["notes"].read_text()
    assert "U = 80" in notes and "`gamma` = 2.5 **(changed" in notes and "`bound` = 80 **(changed" in notes
    assert "U = 65" not in notes


def test_seed003_bound_and_kappa_are_recorded():
    r = reproduce("003-fig3", runs=4, kappa=2, datasets=2, bound=70.0, epsilons=[1.0])
    assert r.params["kappa"] == 2 and r.params["bound"] == 70.0 and r.params["epsilons"] == [1.0]
    assert "U = 70" in r.notes and "κ = 2" in figure_title(FIGURES["003-fig3"], r.params)
    assert "\n" not in repr(r) and "changed" in repr(r)


def test_authors_order_option():
    r = reproduce("003-fig1", runs=2, order="authors", epsilons=[1.0])
    assert "order: given" in r.notes or "order: authors" in r.notes
    with pytest.raises(ValueError, match="`order`"):
        reproduce("003-fig1", runs=2, order="random", epsilons=[1.0])


def test_dataset_unit_standard_error():
    rng = np.random.default_rng(0)
    # 5 datasets whose true MAE differs (0, 1, 2, 3, 4) + small run noise: the runs are clustered
    per = [k + 0.01 * rng.standard_normal(1000) for k in range(5)]
    value, se = dataset_unit_mean(per)
    means = np.array([p.mean() for p in per])
    assert value == pytest.approx(np.concatenate(per).mean())
    assert se == pytest.approx(means.std(ddof=1) / np.sqrt(5))
    naive = np.concatenate(per).std(ddof=1) / np.sqrt(5000)
    assert se > 20 * naive  # treating 5000 clustered runs as independent would understate it
    v1, se1 = dataset_unit_mean([per[0]])
    assert se1 == pytest.approx(per[0].std(ddof=1) / np.sqrt(1000))


def test_seed003_scaling_figures_use_datasets_as_units(monkeypatch):
    import dpopt.experiments.seed003 as s3

    calls = []
    real = s3.dataset_unit_mean

    def spy(per):
        calls.append(len([p for p in per if np.size(p)]))
        return real(per)

    monkeypatch.setattr(s3, "dataset_unit_mean", spy)
    s3.fig4(runs=6, datasets=3, epsilons=[1.0])
    assert calls and all(c == 3 for c in calls)


@pytest.mark.slow
def test_saving_a_figure_keeps_the_users_backend(tmp_path):
    code = (
        "import matplotlib\nmatplotlib.use('svg')\n"
        "from dpopt.experiments import FIGURES, reproduce\nfrom dpopt.experiments.plotting import save_figure\n"
        "r = reproduce('003-fig5', epsilons=[0.5, 1.0])\n"
        f"save_figure(r.frame, FIGURES['003-fig5'], {str(tmp_path / 'f.png')!r}, params=r.params)\n"
        "print(matplotlib.get_backend())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "svg" and (tmp_path / "f.png").stat().st_size > 1000


def test_library_never_calls_matplotlib_use():
    """Only the command line (dpopt/cli/) picks a matplotlib back-end."""
    paths = [p for p in (ROOT / "dpopt").rglob("*.py") if "cli" not in p.relative_to(ROOT / "dpopt").parts]
    assert any(p.parent.name == "experiments" for p in paths)
    for path in paths:
        assert "matplotlib.use(" not in path.read_text(), path
