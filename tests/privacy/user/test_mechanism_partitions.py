"""Noise laws and the partition-selection threshold, against direct sums of the probability mass."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpopt._validation import DpoptInputError
from dpopt.noise import epsilon_rational, integer_source
from dpopt.noise.discrete_laplace import discrete_laplace_array
from dpopt.privacy.user.mechanism import DiscreteLaplace, LaplaceSimulation
from dpopt.privacy.user.partitions import match_partitions, read_partitions, selection_threshold

from .conftest import CELLS, SLOT_NS, make_agg


def _dlap_pmf(s: float, lim: int = 20000) -> tuple[np.ndarray, np.ndarray]:
    z = np.arange(-lim, lim + 1)
    w = np.exp(-np.abs(z) / s)
    return z, w / w.sum()


@pytest.mark.parametrize(("k", "eps", "delta"), [(1, 1.0, 1e-5), (4, 0.5, 1e-6), (12, 2.0, 1e-3), (3, 10.0, 0.01)])
def test_discrete_threshold_releases_a_single_user_grid_with_probability_at_most_delta_over_k(k, eps, delta):
    mech = DiscreteLaplace(integer_source(0), seeded=True)
    rule = selection_threshold(k, eps, delta, mech)
    s = k / float(epsilon_rational(eps))
    z, p = _dlap_pmf(s)
    p_one = p[1 + z >= rule.threshold].sum()  # a grid with one user
    assert p_one <= delta / k * (1 + 1e-9)
    # and the threshold is the smallest integer that does it
    assert p[1 + z >= rule.threshold - 1].sum() > delta / k
    assert rule.release_probability(1, mech) == pytest.approx(p_one, rel=1e-6)
    for users in (2, 50, int(rule.threshold) + 3):
        assert rule.release_probability(users, mech) == pytest.approx(p[users + z >= rule.threshold].sum(), rel=1e-6)


@pytest.mark.parametrize(("k", "eps", "delta"), [(1, 1.0, 1e-5), (5, 0.3, 1e-4)])
def test_continuous_threshold_closed_form(k, eps, delta):
    mech = LaplaceSimulation(np.random.default_rng(0))
    rule = selection_threshold(k, eps, delta, mech)
    assert rule.threshold == pytest.approx(1 + k / eps * math.log(k / (2 * delta)))
    b = k / eps
    assert 0.5 * math.exp(-(rule.threshold - 1) / b) == pytest.approx(delta / k)
    # Monte Carlo of the release rule for a grid sitting right at the threshold: probability 1/2
    x = rule.threshold + mech.integer(np.zeros(20000), l1=k, l2=math.sqrt(k), budget=eps)
    assert abs(np.mean(x >= rule.threshold) - 0.5) < 0.02


def test_discrete_abs_quantile_against_pmf():
    mech = DiscreteLaplace(integer_source(0), seeded=True)
    for s in (0.7, 3.0, 40.0):
        z, p = _dlap_pmf(s)
        for prob in (0.05 / 3, 0.1):
            x = mech.abs_quantile(s, prob)
            assert p[np.abs(z) > x].sum() <= prob * (1 + 1e-9)
            assert p[np.abs(z) > x - 1].sum() > prob


def test_discrete_mechanism_uses_the_exact_sampler():
    mech = DiscreteLaplace(integer_source(7), seeded=True)
    out = mech.integer(np.array([3, 4]), l1=2, l2=2.0, budget=1.0)
    src = integer_source(7)
    s = Fraction(2) / epsilon_rational(1.0)
    assert list(out) == list(np.array([3, 4]) + discrete_laplace_array(s, 2, src))
    with pytest.raises(DpoptInputError, match="l1"):
        mech.integer(np.array([1]), l1=1.5, l2=1.0, budget=1.0)


def test_read_partitions_validates_and_matches(tmp_path):
    import h3

    cells = [h3.int_to_str(c) for c in CELLS[:2]]
    path = tmp_path / "p.csv"
    pd.DataFrame({"cell": cells + [cells[0]], "slot": ["1970-01-01T00:00:00Z", "1970-01-01T01:00:00Z",
                                                       "1970-01-01T00:00:00Z"]}).to_csv(path, index=False)
    plist = read_partitions(path, h3_resolution=7, slot_ns=SLOT_NS)
    assert len(plist) == 2  # duplicate merged
    agg = make_agg([("a", 0, 1, 1.0), ("a", 3, 1, 1.0)])  # grid 0 listed; grid 3 not
    idx, listed = match_partitions(agg, plist)
    from .conftest import grid_of

    assert sorted(idx.tolist()) == [-1, grid_of(agg, 0)] and listed.sum() == 1 and listed[grid_of(agg, 0)]
    bad = pd.DataFrame({"cell": ["nothex"], "slot": ["1970-01-01T00:00:00Z"]})
    with pytest.raises(DpoptInputError, match=r"must hold H3 indexes; got 'nothex'$"):  # the text, not np.str_(…)
        read_partitions(bad, h3_resolution=7, slot_ns=SLOT_NS)
    off = pd.DataFrame({"cell": cells[:1], "slot": ["1970-01-01T00:30:00Z"]})
    with pytest.raises(DpoptInputError, match="lattice"):
        read_partitions(off, h3_resolution=7, slot_ns=SLOT_NS)
    with pytest.raises(DpoptInputError, match="resolution"):
        read_partitions(pd.DataFrame({"cell": [h3.cell_to_parent(cells[0], 6)], "slot": ["1970-01-01T00:00:00Z"]}),
                        h3_resolution=7, slot_ns=SLOT_NS)
    with pytest.raises(DpoptInputError, match="columns"):
        read_partitions(pd.DataFrame({"cell": cells}), h3_resolution=7, slot_ns=SLOT_NS)
    with pytest.raises(DpoptInputError, match=r"missing \['cell', 'slot'\] \(its columns: 'h3', 'hour'; rename them"):
        read_partitions(pd.DataFrame({"h3": cells, "hour": "1970-01-01T00:00:00Z"}), h3_resolution=7, slot_ns=SLOT_NS)
    semi = tmp_path / "semi.csv"  # a semicolon-separated file reads as one column: the message says so
    semi.write_text(f"cell;slot\n{cells[0]};1970-01-01T00:00:00Z\n")
    with pytest.raises(DpoptInputError, match="';'-separated"):
        read_partitions(semi, h3_resolution=7, slot_ns=SLOT_NS)
    with pytest.raises(DpoptInputError, match="delta"):
        selection_threshold(2, 1.0, 0.0, LaplaceSimulation(np.random.default_rng(0)))


def test_a_list_of_integer_cells_as_text_reads_as_their_h3_strings(tmp_path):
    """A CSV list is read as text, so H3's integer form (decimal text) was refused as "must hold H3
    indexes" although the cell reader's doc accepts it; now it reads as the hex form does."""
    import h3

    path, hexed = tmp_path / "p.csv", tmp_path / "h.csv"
    rows = {"slot": ["1970-01-01T00:00:00Z", "1970-01-01T01:00:00Z"]}
    pd.DataFrame({"cell": [str(int(c)) for c in CELLS[:2]], **rows}).to_csv(path, index=False)
    pd.DataFrame({"cell": [h3.int_to_str(int(c)) for c in CELLS[:2]], **rows}).to_csv(hexed, index=False)
    got, want = (read_partitions(p, h3_resolution=7, slot_ns=SLOT_NS) for p in (path, hexed))
    assert np.array_equal(got.cells, want.cells) and np.array_equal(got.slots, want.slots)


@pytest.mark.parametrize("column, rows", [
    ("cell", {"cell": [None, "cell1"], "slot": ["1970-01-01T00:00:00Z", "1970-01-01T01:00:00Z"]}),
    ("cell", {"cell": ["cell0", " "], "slot": ["1970-01-01T00:00:00Z", "1970-01-01T01:00:00Z"]}),
    ("slot", {"cell": ["cell0", "cell1"], "slot": ["1970-01-01T00:00:00Z", np.nan]})])
def test_an_empty_cell_or_slot_is_refused_by_its_row(tmp_path, column, rows):
    """A list with an empty field failed with "'float' object has no attribute 'isdecimal'" (a fuzz
    find); it is refused naming the column and the data row, from a DataFrame or a CSV alike."""
    import h3

    names = {f"cell{i}": h3.int_to_str(int(c)) for i, c in enumerate(CELLS[:2])}
    frame = pd.DataFrame({"cell": [names.get(c, c) for c in rows["cell"]], "slot": rows["slot"]})
    row = 1 + next(i for i, v in enumerate(frame[column]) if pd.isna(v) or not str(v).strip())
    frame.to_csv(tmp_path / "p.csv", index=False)
    for source in (frame, tmp_path / "p.csv"):
        with pytest.raises(DpoptInputError, match=rf"^`partitions` column '{column}' must not be empty; .* data row {row}$"):
            read_partitions(source, h3_resolution=7, slot_ns=SLOT_NS)


@pytest.mark.parametrize("slots, match", [
    (["2300-01-01T00:00:00Z"], "ISO 8601 times from 1677-09-22 to 2262-04-11"),  # outside pandas' ns range
    (["1800-01-01T00:00:00Z", "2024-03-10T00:00:00Z"], "span less than 146 years"),  # np.diff wrapped around
    (["1800-01-01T00:00:00Z", "2000-01-01T00:00:00Z", "2200-01-01T00:00:00Z"], "span less than 146 years")])
def test_a_list_whose_period_does_not_fit_in_int64_ns_is_refused_by_name(slots, match):
    """A list spanning more than 292 years was refused as "not sorted" (the int64 difference of two
    slots wrapped) or failed deep in the lattice (the period's length in ns overflowed int64): one line
    naming `partitions` now."""
    import h3

    frame = pd.DataFrame({"cell": h3.int_to_str(int(CELLS[0])), "slot": slots})
    with pytest.raises(DpoptInputError, match=match) as err:
        read_partitions(frame, h3_resolution=7, slot_ns=SLOT_NS)
    assert str(err.value).startswith("`partitions`") and "\n" not in str(err.value)


def test_a_slot_without_offset_is_on_the_release_clock():
    """A slot written without a UTC offset is a wall time of the release's zone (the records' zone,
    ``timezone``; UTC without one), as a record's time is: 06:00 in Paris in July is 04:00Z. Read as
    UTC whatever the zone, it was two hours off the records it lists. A wall time that does not
    exist there (the spring change's 02:30) and text that is no ISO date are refused in one line
    naming `partitions`."""
    import h3

    cell = h3.int_to_str(CELLS[0])
    hour = 3_600 * 10**9

    def slot_of(text: str, tz: str | None) -> int:
        return int(read_partitions(pd.DataFrame({"cell": [cell], "slot": [text]}), h3_resolution=7, slot_ns=hour,
                                   timezone=tz).slots[0])

    want = pd.Timestamp("2024-07-01T04:00:00Z").value
    assert slot_of("2024-07-01T06:00:00", "Europe/Paris") == want
    assert slot_of("2024-07-01T06:00:00+02:00", "Europe/Paris") == want == slot_of("2024-07-01T04:00:00Z", None)
    assert slot_of("2024-07-01T04:00:00Z", "Europe/Paris") == want  # an offset wins over the zone
    assert slot_of("2024-07-01T04:00:00", None) == want  # no zone: UTC
    assert slot_of("2024-07-01", None) == pd.Timestamp("2024-07-01T00:00:00Z").value
    for text, tz in (("2024-03-31T02:30:00", "Europe/Paris"), ("1719813600", None), ("soon", None)):
        with pytest.raises(DpoptInputError, match="`partitions` column 'slot'") as err:
            read_partitions(pd.DataFrame({"cell": [cell], "slot": [text]}), h3_resolution=7, slot_ns=hour, timezone=tz)
        assert "\n" not in str(err.value) and repr(text) in str(err.value)


def test_a_file_that_is_no_list_is_refused_in_a_short_line(tmp_path):
    """A text file of one 3,000-character line (no comma) was quoted whole as its header in the
    one-line error (a fuzz find); each column name is cut at 40 characters."""
    path = tmp_path / "noise.csv"
    path.write_text("x" * 3000 + "\n")
    with pytest.raises(DpoptInputError, match="must have columns 'cell' and 'slot'") as err:
        read_partitions(path, h3_resolution=7, slot_ns=SLOT_NS)
    assert len(str(err.value)) < 200 and "x" * 40 + "…" in str(err.value)
