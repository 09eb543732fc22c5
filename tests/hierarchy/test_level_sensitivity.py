"""Per-level sensitivities of the `user` hierarchy measurements, by enumerating every placement of
one bounded user (≤ k listed finest grids, ≤ c records each, extreme lattice terms)."""

import itertools

import h3
import numpy as np
import pytest

from dpopt.hierarchy.tree import HOUR_NS, Level, build_hierarchy
from dpopt.userdp.levels import level_sensitivity, max_merge_square, node_sums

HY, HZ = 5, 7  # lattice half-ranges H_Y, H_Z (any positive integers)
#: per record (y, z): value 0 → (−H_Y, +H_Z), U/2 → (0, −H_Z), U → (+H_Y, +H_Z)
TERMS = [(-HY, HZ), (0, -HZ), (HY, HZ)]


def tiny_hierarchy():
    base = h3.latlng_to_cell(30.27, -97.74, 8)
    sibs = [h3.str_to_int(c) for c in h3.cell_to_children(h3.cell_to_parent(base, 7), 8)][:2]
    other = h3.str_to_int(h3.latlng_to_cell(30.40, -97.60, 8))
    cells = np.array([sibs[0], sibs[1], other, sibs[0], other], dtype=np.int64)
    slots = np.array([0, 0, 0, HOUR_NS, HOUR_NS], dtype=np.int64)
    levels = (Level(8, HOUR_NS), Level(8, 2 * HOUR_NS), Level(7, 2 * HOUR_NS), Level(7, 0), Level(6, 0))
    return build_hierarchy(cells, slots, levels)


def per_grid_options(c):
    opts = []
    for n in range(1, c + 1):
        for recs in itertools.product(TERMS, repeat=n):
            opts.append((n, sum(r[0] for r in recs), sum(r[1] for r in recs)))
    return opts


@pytest.mark.parametrize("k,c", [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (5, 1)])
def test_level_sensitivity_is_the_brute_force_maximum(k, c):
    H = tiny_hierarchy()
    G = H.finest_node.size
    lev = H.nodes["level"].to_numpy()
    best = {li: np.zeros(6) for li in range(H.n_levels)}  # l1 and l2² of R, Y, Z
    opts = per_grid_options(c)
    for size in range(1, min(k, G) + 1):
        for grids in itertools.combinations(range(G), size):
            for choice in itertools.product(opts, repeat=size):
                vec = np.zeros((3, G), dtype=np.int64)
                for g, (n, y, z) in zip(grids, choice):
                    vec[:, g] = (n, y, z)
                for s in range(3):
                    d = node_sums(H, vec[s])
                    for li in range(H.n_levels):
                        dl = d[lev == li]
                        best[li][s] = max(best[li][s], np.abs(dl).sum())
                        best[li][3 + s] = max(best[li][3 + s], (dl.astype(float) ** 2).sum())
    for li in range(H.n_levels):
        sv = level_sensitivity(H.leaves_under[lev == li], k, c, HY, HZ)
        assert (sv.count_l1, sv.sum_l1_units, sv.sumsq_l1_units) == tuple(best[li][:3])
        for got, want in zip((sv.count_l2, sv.sum_l2_units, sv.sumsq_l2_units), best[li][3:]):
            assert got**2 >= want and round(got**2) == want


@pytest.mark.parametrize("seed", range(20))
def test_max_merge_square_brute_force(seed):
    rng = np.random.default_rng(seed)
    caps = rng.integers(1, 4, size=int(rng.integers(1, 5)))
    k = int(rng.integers(1, 7))
    best = 0
    for m in itertools.product(*[range(a + 1) for a in caps]):
        if sum(m) <= k:
            best = max(best, sum(x * x for x in m))
    assert max_merge_square(caps, k) == best


@pytest.mark.parametrize("unit", ["epsilon", "rho"])
def test_answer_shares_minimise_the_predicted_error(unit):
    """Shares ∝ w^(1/3) (Laplace) or w^(1/2) (Gaussian) beat every random feasible split of the
    objective Σ w_l/ε_l² resp. Σ w_l/ρ_l (written here from scratch)."""
    from dpopt.userdp.levels import answer_shares

    rng = np.random.default_rng(1)
    lev = rng.integers(2, 6, 200)
    weight = rng.uniform(0, 3, 200)
    shares = answer_shares(lev, weight, 2, 6, unit)
    assert shares[:2].sum() == 0 and shares.sum() == pytest.approx(1.0)
    w = np.bincount(lev, weights=weight + 1e-9, minlength=6)[2:]
    w = w + 0.05 * w.max()
    power = 2 if unit == "epsilon" else 1
    best = np.sum(w / shares[2:] ** power)
    for _ in range(2000):
        x = rng.dirichlet(np.ones(4))
        assert np.sum(w / x**power) >= best - 1e-9
