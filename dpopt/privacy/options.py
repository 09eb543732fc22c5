"""Typed options shared by both privacy models and the front door.

Each is a small frozen dataclass that validates itself on construction, so a bad option fails
before any record is read. The privacy models' own options are
:class:`dpopt.privacy.user.UserOptions` and
:class:`dpopt.privacy.public_occupancy.PublicOccupancyOptions`; the budget is common:

* :class:`Budget` — what one user may lose over the whole release: ``epsilon_total`` (pure ε-DP
  with Laplace noise; with Gaussian noise and ``delta`` the (ε, δ) the release must imply) or
  ``rho`` (ρ-zCDP, Gaussian);
* :class:`PerGridBudget` — the seeds' per-grid ε (``public-occupancy`` only: the user model's
  :func:`~dpopt.privacy.user.measure` accepts a :class:`Budget` only);
* :class:`GridOptions` — the finest grid (H3 resolution × UTC slot length);
* :class:`NoiseOptions` — the sampler (exact discrete or numpy simulation), the seed (tests and
  demos only) and the lattice λ = 2^-granularity_bits.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from .._validation import DpoptInputError, check_choice, check_confidence, check_delta, check_epsilon
from ..noise import MECHANISMS, check_granularity_bits, lattice_bits
from ..records.options import GridOptions

__all__ = ["Budget", "PerGridBudget", "GridOptions", "NoiseOptions", "NOISES", "check_confidence"]

NOISES = ("discrete", "numpy")


@dataclass(frozen=True)
class Budget:
    """The whole release's budget for every user (validated on construction).

    Exactly one of ``epsilon_total`` and ``rho``; ``rho`` needs ``mechanism="gaussian"``;
    ``delta`` in (0, 1) when given (whether a model needs or refuses it is the model's check:
    Laplace noise over a public partition list has no δ to spend).
    """

    epsilon_total: float | None = None
    rho: float | None = None
    delta: float | None = None
    mechanism: str = "laplace"

    def __post_init__(self) -> None:
        check_choice(self.mechanism, "mechanism", tuple(MECHANISMS))
        if (self.epsilon_total is None) == (self.rho is None):
            raise DpoptInputError("give exactly one budget: `epsilon_total` (whole release) or `rho` (whole "
                                  "release, Gaussian); got " + ("both" if self.rho is not None else "neither"))
        if self.epsilon_total is not None:
            _check_total(self.epsilon_total, "epsilon_total")
        if self.rho is not None:
            if self.mechanism != "gaussian":
                raise DpoptInputError(f"`rho` is a zCDP budget: use it with mechanism='gaussian'; got rho={self.rho!r}")
            _check_total(self.rho, "rho")
        if self.delta is not None:
            check_delta(self.delta)

    @property
    def gaussian(self) -> bool:
        return self.mechanism == "gaussian"


#: the smallest whole-release budget (ε or ρ): a release spends it in pieces down to ≈ 1/400 of it
#: (a vote's half, a pilot statistic of one marginal), and the exact samplers spend budgets on a
#: lattice of 2^-30, so a smaller total would fail deep inside with a piece's value instead of this
#: argument's (a public floor, far below any budget that publishes anything)
MIN_BUDGET_TOTAL = 2.0 ** -20


def _check_total(value: float, name: str) -> None:
    check_epsilon(value, name)
    if float(value) < MIN_BUDGET_TOTAL:
        raise DpoptInputError(f"`{name}` must be >= 2^-20 (≈ 9.5e-07): the release spends it in pieces the exact "
                              f"samplers cannot draw below that; got {value!r}")


@dataclass(frozen=True)
class PerGridBudget:
    """The seeds' mode (``public-occupancy`` only): ε of every grid's release; a user kept in K
    grids loses K·ε (seed 002 Thm II.3). Laplace noise only."""

    epsilon: float

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon, "epsilon")

    mechanism = "laplace"


@dataclass(frozen=True)
class NoiseOptions:
    """``noise`` "discrete" (exact samplers, the OS CSPRNG: real releases) or "numpy" (simulation
    only); ``seed`` reproducible noise (NOT for a real release); the lattice λ = 2^-k of the exact
    samplers: k = ``granularity_bits``, or by default (None) :func:`dpopt.noise.lattice_bits` of the
    declared range's width (2^-12 for widths 1 to 128, relative to the width outside: unit-free)."""

    noise: str = "discrete"
    seed: int | None = None
    granularity_bits: int | None = None

    def __post_init__(self) -> None:
        check_choice(self.noise, "noise", NOISES)
        if self.granularity_bits is not None:
            check_granularity_bits(self.granularity_bits)
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral)):
            raise DpoptInputError(f"`seed` must be an integer or None; got {self.seed!r}")

    def bits_for(self, bound: float) -> int:
        """k of the lattice for values in a range of width ``bound`` (public): ``granularity_bits``
        when given, else :func:`dpopt.noise.lattice_bits`."""
        return lattice_bits(bound) if self.granularity_bits is None else int(self.granularity_bits)


