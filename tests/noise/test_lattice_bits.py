"""The default value lattice λ = 2^-k, k = lattice_bits(U): relative to the range's width outside
[1, 128), so that a release does not depend on the values' unit (dpopt.noise.discrete_laplace)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpopt._validation import DpoptInputError
from dpopt.noise import DEFAULT_GRANULARITY_BITS, check_granularity_bits, lattice_bits
from dpopt.privacy.user.bounding import check_lattice_capacity, lattice_halves

#: widths across 24 decades, with both ends of every binade inside [2^-40, 2^40]
WIDTHS = np.concatenate([np.geomspace(1e-12, 1e12, 241),
                         [2.0**e for e in range(-40, 41)], [np.nextafter(2.0**e, 0) for e in range(-39, 41)]])


@pytest.mark.parametrize("U", WIDTHS.tolist())
def test_every_width_keeps_its_steps_and_rounds_by_a_bounded_share_of_its_range(U: float) -> None:
    k = lattice_bits(U)
    lam = 2.0**-k
    assert math.frexp(lam)[0] == 0.5  # a power of two: multiplying by 1/λ is exact
    assert lam / 2 <= U * 2.0**-13  # a value moves by at most 2^-13 of the range
    assert U / lam >= 2**12 and (U * U / 8) / lam >= 2**9 - 1e-9  # the sums and the squares keep their steps
    if U >= 64:
        assert U / lam >= 2**18  # from 64 up, 2^18 to 2^19 steps whatever the unit
        assert U / lam < 2**19 or U < 128
    if 1 <= U < 128:
        assert k == DEFAULT_GRANULARITY_BITS  # the lattice of every release before the rule


def test_the_lattice_never_gets_finer_as_the_range_grows() -> None:
    ks = [lattice_bits(U) for U in np.sort(WIDTHS)]
    assert all(a >= b for a, b in zip(ks, ks[1:]))


def test_scaling_by_a_power_of_two_from_128_up_scales_the_lattice_with_it() -> None:
    """From U = 128 up the lattice is exactly relative: values × 2^s give the same lattice integers."""
    rng = np.random.default_rng(3)
    for U in rng.uniform(128, 1e4, 20):
        for s in (1, 7, 20, 25):
            assert lattice_bits(U * 2.0**s) == lattice_bits(U) - s
            assert lattice_halves(U * 2.0**s, lattice_bits(U * 2.0**s))[1] == lattice_halves(U, lattice_bits(U))[1]


@pytest.mark.parametrize("U", [1e-12, 1e-6, 0.01, 0.5, 1.0, 120.0, 1e4, 1e6, 1e9, 1e12])
def test_the_stated_widths_fit_the_default_caps(U: float) -> None:
    check_lattice_capacity(1024, 64, U, lattice_bits(U))  # the engine's caps (max_grids, max_records)


@pytest.mark.parametrize("U", [1e13, 1e-14])
def test_outside_the_stated_widths_the_capacity_refuses_in_one_line(U: float) -> None:
    with pytest.raises(DpoptInputError, match=r"express the values in a unit where the range is between 1e-12 and 1e12"):
        check_lattice_capacity(1024, 64, U, lattice_bits(U))


@pytest.mark.parametrize("U", [0.0, -1.0, float("nan"), float("inf"), 1e-100, 1e30])
def test_a_width_no_lattice_holds_is_refused_naming_the_bound(U: float) -> None:
    with pytest.raises(DpoptInputError, match=r"`bound`"):
        lattice_bits(U)


@pytest.mark.parametrize("k", [-65, 129, 1.5, "12", True, None])
def test_granularity_bits_outside_the_range_are_refused(k) -> None:
    with pytest.raises(DpoptInputError, match=r"`granularity_bits` must be an integer in -64\.\.128"):
        check_granularity_bits(k)
