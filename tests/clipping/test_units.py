"""The clipping LPs and the array-length surrogate LP do not depend on the unit of the values.

Every bound of the clipping LPs is U times a number and their costs do not involve U; the surrogate
LP's costs are U times numbers. So the optimum at U is U times the optimum at U = 1, and the solvers
solve in units of U. Before, the LPs were solved in their own units: at U = 1e-7 every constraint sat
inside HiGHS's 1e-7 feasibility tolerance, ``solve_clipping([1, 2], 1e-7, 1e-3)`` reported "optimal"
at 667× E^OPT and its KKT check passed (residuals were floored at a scale of 1); the surrogate LP at
U = 1e-6 returned m = 9 at 21× the minimum (m = 14). An outside fuzz run found both.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import dpopt
from dpopt.solve import Status


@pytest.mark.parametrize("U", [1e-9, 1e-7, 1e-3, 1.0, 1e6, 1e12])
@pytest.mark.parametrize("formulation", ["per-user", "per-sample"])
def test_the_clipping_lp_finds_e_opt_in_any_unit(U, formulation):
    rng = np.random.default_rng(int(np.log10(U)) + 20)
    for _ in range(6):
        counts = rng.integers(1, 12, rng.integers(1, 7)).tolist()
        eps = float(10 ** rng.uniform(-3, 1))
        for dim in (1, 2):
            closed = dpopt.optimal_clipping(counts, U, eps, dim=dim)
            lp = dpopt.solve_clipping(counts, U, eps, dim=dim, formulation=formulation)
            assert lp.status is Status.OPTIMAL
            assert lp.error == pytest.approx(closed.error, rel=1e-6)
            assert lp.objective == pytest.approx(closed.error, rel=1e-6)
            assert lp.check()


def test_the_kkt_check_is_relative_to_the_data_however_small():
    """A certificate whose bias mass is off by 1 % of the data fails at any U (it passed below U ≈ 1
    when residuals were divided by max(1, U·m))."""
    for U in (1e-7, 1.0, 1e4):
        cert = dpopt.optimal_clipping([1, 2, 5], U, 0.5).certificate
        assert cert.check()
        off = dataclasses.replace(cert, tau=cert.tau - 0.01 * float(np.max(cert.values)))
        assert not off.check()


@pytest.mark.parametrize("U", [1e-9, 1e-6, 1.0, 1e6])
def test_the_surrogate_lp_finds_the_closed_form_minimiser_in_any_unit(U):
    rng = np.random.default_rng(7)
    for _ in range(8):
        counts = rng.integers(1, 30, rng.integers(2, 12)).tolist()
        eps = float(10 ** rng.uniform(-2, 2))
        closed = dpopt.optimal_array_length(counts, U, eps, method="surrogate")
        lp = dpopt.optimal_array_length(counts, U, eps, method="surrogate", solver="lp")
        assert lp.status is Status.OPTIMAL
        assert lp.objective == pytest.approx(closed.objective, rel=1e-7)
        assert lp.length == closed.length or lp.objective == pytest.approx(closed.objective, rel=1e-12)
