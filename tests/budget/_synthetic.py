"""A city-like synthetic occupancy (buses on routes × hours) for the budget planner's identity tests
and benchmarks (tests/benchmarks/bench_budget.py --scale)."""

from __future__ import annotations

import numpy as np

from dpopt import Occupancy


def city_occupancy(n_grids: int = 100_000, seed: int = 0, users_per_1e5: int = 5000,
                   cells_per_hour: int = 8) -> Occupancy:
    """User u runs a route (a run of cells) in a heavy-tailed number of the week's 168 hours; each
    active hour it visits ``cells_per_hour`` consecutive cells of its route, Geo(0.15) records each.
    About ``n_grids`` occupied (cell, hour) grids and 5.8 pairs per grid at the defaults."""
    rng = np.random.default_rng(seed)
    H = 24 * 7
    C = max(1, int(n_grids // H))
    L = max(10, int(users_per_1e5 * n_grids / 1e5))
    route_start = rng.integers(0, C, size=L)
    route_len = rng.integers(20, 80, size=L)
    hours_active = np.minimum(H, rng.pareto(1.2, size=L).astype(int) * 4 + 6)
    rows, cols, cnt = [], [], []
    for u in range(L):
        hs = rng.choice(H, size=hours_active[u], replace=False)
        off = rng.integers(0, route_len[u], size=hs.size)
        c = (route_start[u] + off[:, None] + np.arange(cells_per_hour)[None, :]) % C
        g = c * H + hs[:, None]
        rows.append(np.full(g.size, u))
        cols.append(g.ravel())
        cnt.append(rng.geometric(0.15, size=g.size))
    return Occupancy.from_triples(np.concatenate(rows), np.concatenate(cols), np.concatenate(cnt))
