"""What the texts claim an interval holds, and what the cap's re-weighting figure can see.

Found by an outside-style check (session 54): under ``--strategy place`` report.md said every
``mean_error_bound`` held "the mean of each listed grid it answers" while the cell's interval over
the whole period covered 0.12–0.84 of the grids' own means where the hour moved the value; and where
two users held 90 % of the records the histogram of records per user saw no group above the cap,
summary.json read ``reweighting`` 0, and report.md said a mean "can sit up to 0 × the spread" from the
mean of all its records (it sat 45 away)."""

from __future__ import annotations

from types import SimpleNamespace

from dpopt.cli.release import _say_reweighting
from dpopt.writers._published import REWEIGHTING_SHOWN, reweighting_seen
from dpopt.writers.report_md import _reweighting_text, _user_accuracy


def _summary(**kw) -> SimpleNamespace:
    base = dict(method="crossed", confidence=0.95, grids_released=10, answers_vary_by=None, shape="place",
                reweighting=0.0, record_cap=16, record_histogram={"epsilon": 0.05})
    return SimpleNamespace(**{**base, **kw}, as_dict=lambda: {"answers_vary_by": None})


def test_only_the_engine_claims_each_grids_own_mean():
    engine = " ".join(_user_accuracy(_summary(shape="optimised marginals"), True))
    assert "for the mean of each listed grid it answers" in engine
    for shape in ("place", "levels"):
        named = " ".join(_user_accuracy(_summary(shape=shape), True))
        assert "each listed grid it answers" not in named
        assert "the node the row stands for" in named and "does not hold" in named


def test_a_reweighting_that_rounds_to_zero_says_what_the_histogram_cannot_see(capsys):
    for d in (0.0, 1e-16, REWEIGHTING_SHOWN / 2):
        s = _summary(reweighting=d)
        assert not reweighting_seen(s)
        text = _reweighting_text(s)
        assert "up to 0" not in text and "× the spread" not in text
        assert "shows no group of users above the cap T = 16" in text
        assert "fewer than about" in text and "the intervals leave this out" in text  # unseen_users at ε = 0.05
        _say_reweighting(SimpleNamespace(summary=s), "user")
        err = capsys.readouterr().err
        assert "note: the histogram of records per user shows no group" in err and "move by about" not in err
    seen = _summary(reweighting=0.2)
    assert reweighting_seen(seen) and "up to 0.4 × the spread" in _reweighting_text(seen)
    _say_reweighting(SimpleNamespace(summary=seen), "user")
    assert "the records' weights move by about 0.2" in capsys.readouterr().err
    _say_reweighting(SimpleNamespace(summary=seen), "public-occupancy")  # no cap under the other model
    assert capsys.readouterr().err == ""
