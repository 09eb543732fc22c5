"""Choice of the array length m for pseudo-user Array-Averaging (seed 003, Sections III, V and VI).

Notation (models/array_length.md; corrections in models/errata.md): counts m_ℓ ≥ 1 of L users, M = Σ_ℓ m_ℓ,
m_* = min m_ℓ, m^* = max m_ℓ, Γ_m = Σ_ℓ min{m_ℓ, m}, samples in [0, U].

* Worst-case error of Array-Averaging with length m (Lemma V.1 + eq. (11), eq. (15))::

      E_ε(m) = U(1 − Γ_m/M) + U·m/(ε·Γ_m)

  :func:`array_averaging_error` evaluates it for many m at once from the sorted counts and their
  prefix sums (Γ_m = P[i] + m·(L − i), i = #{ℓ : m_ℓ < m}).
* Exact minimax length m_UB(ε) (eq. (13)): E_ε is concave between consecutive distinct counts
  (Lemma V.2), so the smallest minimiser is one of the distinct m_ℓ; :func:`optimal_array_length`
  with ``method="exact"`` enumerates them (``solver="enumeration"``), scans every integer of
  [m_*, m^*] (``solver="scan"``) or solves the "choose one candidate" MILP in HiGHS
  (``solver="milp"``).
* Convex surrogate, problem (19) as reconstructed in ERRATA E7::

      F_ε(m) = U(1 − Γ_m/M) + U·m/(ε·L·m_*),   m_* ≤ m ≤ m^*

  closed form: the (⌊k⌋+1)-th largest m_ℓ, k = M/(ε·L·m_*) (m_* if ⌊k⌋+1 > L); or an LP in HiGHS
  (hypograph of the concave Σ min{m_ℓ, m}). The paper's literal KKT step (ii) is
  :func:`paper_kkt_length` (wrong at kinks, ERRATA E7).
* The seed's practical choices: heuristic (9), maximise √m·Γ_m/m = Γ_m/√m, and the median.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from .._validation import (
    DpoptInputError,
    _show,
    as_counts,
    check_bound,
    check_choice,
    check_epsilon,
    check_noise_scale,
    check_nonnegative_float,
    check_positive_int,
    solver_options,
)
from ..solve import LinearModel, ModelBuilder, Status

__all__ = [
    "CountProfile",
    "ArrayLengthPlan",
    "array_averaging_error",
    "optimal_array_length",
    "exact_length_path",
    "surrogate_objective",
    "surrogate_length",
    "paper_kkt_length",
    "heuristic_length",
    "median_length",
    "gain",
    "max_gain",
    "switch_points",
    "lemma_v4_thresholds",
    "array_length_milp",
    "surrogate_lp",
]

Method = Literal["exact", "surrogate", "heuristic", "median"]
_METHODS = ("exact", "surrogate", "heuristic", "median")
#: relative tolerance under which two errors count as tied (the smallest tied m is returned, as
#: m_UB(ε) is the *smallest* minimiser; exact ties occur at the switch points of Corollary V.1)
TIE_RTOL = 1e-12

_SOLVERS = {
    "exact": ("enumeration", "scan", "milp"),
    "surrogate": ("closed-form", "lp"),
    "heuristic": ("enumeration", "scan"),
    "median": ("closed-form",),
}


@dataclass(frozen=True, eq=False)
class CountProfile:
    """Sorted counts with prefix sums: Γ_m for many m in O(log L) each.

    Attributes
    ----------
    sorted_counts : ndarray of int, ascending
    prefix : ndarray of int, ``prefix[i] = Σ of the i smallest counts`` (length L + 1)
    values : ndarray of int
        Distinct counts, ascending.
    first : ndarray of int
        ``first[j]`` = number of counts < ``values[j]``.
    """

    sorted_counts: np.ndarray
    prefix: np.ndarray
    values: np.ndarray
    first: np.ndarray

    def __repr__(self) -> str:
        return (f"CountProfile(users={self.sorted_counts.size}, total={int(self.prefix[-1])}, "
                f"distinct={self.values.size}, min={int(self.sorted_counts[0])}, max={int(self.sorted_counts[-1])})")

    @classmethod
    def from_counts(cls, counts: Any, *, validated: bool = False) -> CountProfile:
        m_l = counts if validated else as_counts(counts)
        s = np.sort(m_l)
        prefix = np.zeros(s.size + 1, dtype=np.int64)
        np.cumsum(s, out=prefix[1:])
        new = np.empty(s.size, dtype=bool)
        new[0] = True
        np.not_equal(s[1:], s[:-1], out=new[1:])
        first = np.flatnonzero(new)
        return cls(sorted_counts=s, prefix=prefix, values=s[first], first=first)

    @property
    def num_users(self) -> int:
        return int(self.sorted_counts.size)

    @property
    def total(self) -> int:
        """M = Σ_ℓ m_ℓ."""
        return int(self.prefix[-1])

    @property
    def min_count(self) -> int:
        return int(self.sorted_counts[0])

    @property
    def max_count(self) -> int:
        return int(self.sorted_counts[-1])

    def gamma(self, length: Any) -> np.ndarray:
        """Γ_m = Σ_ℓ min{m_ℓ, m} for every m in ``length`` (any real m ≥ 0)."""
        m = np.asarray(length)
        i = np.searchsorted(self.sorted_counts, m, side="left")
        return self.prefix[i] + m * (self.num_users - i)

    def gamma_at_values(self) -> np.ndarray:
        """Γ at each distinct count (no search)."""
        return self.prefix[self.first] + self.values * (self.num_users - self.first)

    def kth_largest(self, k: int) -> int:
        """The k-th largest count (1-based)."""
        return int(self.sorted_counts[self.num_users - k])


def _lengths(length: Any) -> tuple[np.ndarray, bool]:
    scalar = np.ndim(length) == 0
    arr = np.atleast_1d(np.asarray(length))
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise DpoptInputError(f"`length` must be a positive integer or an array of them; got {_show(length)}")
    if arr.dtype.kind == "f" and (not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))):
        raise DpoptInputError(f"`length` must hold whole numbers; got {_show(length)}")
    if arr.ndim != 1 or arr.size == 0 or np.any(arr < 1):
        raise DpoptInputError(f"`length` must be an integer >= 1 or a 1-D array of them; got {_show(length)}")
    return arr.astype(np.int64), scalar


def _setup(counts: Any, bound: float, epsilon: float) -> tuple[float, float, CountProfile]:
    """Validated U, ε and the count profile (shared by every entry point)."""
    U = check_bound(bound)
    eps = check_epsilon(epsilon)
    prof = CountProfile.from_counts(counts)
    check_noise_scale(U * float(prof.max_count), eps, f"U·m/(ε·Γ_m) of eq. (15) at U = {U!r}")
    return U, eps, prof


def _error_from_gamma(
    gamma: np.ndarray, m: np.ndarray, total: int, bound: float, epsilon: float
) -> tuple[np.ndarray, np.ndarray]:
    """The two terms of eq. (15) from Γ_m: bias U(1 − Γ_m/M) and noise U·m/(ε·Γ_m)."""
    gamma = np.asarray(gamma, dtype=float)
    bias = bound * (1.0 - gamma / total)
    noise = bound * m / (epsilon * gamma)
    return bias, noise


def _error(prof: CountProfile, m: np.ndarray, gamma: np.ndarray, U: float, eps: float) -> np.ndarray:
    """E_ε(m) of eq. (15) (the single place where it is evaluated)."""
    bias, noise = _error_from_gamma(gamma, m, prof.total, U, eps)
    return bias + noise


def array_averaging_error(counts: Any, bound: float, epsilon: float, length: Any) -> float | np.ndarray:
    """Worst-case error of Array-Averaging with array length m (seed 003, eq. (15)).

    E_ε(m) = U(1 − Γ_m/M) + U·m/(ε·Γ_m): the worst-case clipping bias of Lemma V.1 plus the expected
    absolute Laplace noise (11) with sensitivity U·m/Γ_m (fully filled arrays, K = Γ_m/m).

    This is the *model* of Section V (full arrays). It is exact for WrapAround when m divides Γ_m.
    Otherwise the actual groupings depart from it (tests/arrays/test_privacy.py): WrapAround drops the
    tail and calibrates to U/⌊Γ_m/m⌋ ≥ U·m/Γ_m (more noise, more bias); BestFit calibrates to
    U/K^BF ≤ U·m/Γ_m, but its partially filled arrays weigh samples unequally, so its worst-case bias
    can exceed U(1 − Γ_m/M) (counts [2, 1], m = 2: U/6 instead of 0). Noise must always be calibrated
    to the actual K (``dpopt.mechanisms.array_averaging``), never to this formula.

    Parameters
    ----------
    counts : array-like of int, shape (L,)
        Samples per user m_ℓ ≥ 1.
    bound : float
        Sample bound U > 0.
    epsilon : float
        Privacy parameter ε > 0.
    length : int or array-like of int
        One or many array lengths m ≥ 1 (vectorised: sorted counts + prefix sums, O((L + n) log L)).

    Returns
    -------
    float or ndarray
        E_ε(m), with the shape of ``length``.
    """
    U, eps, prof = _setup(counts, bound, epsilon)
    m, scalar = _lengths(length)
    err = _error(prof, m, prof.gamma(m), U, eps)
    return float(err[0]) if scalar else err


def gain(counts: Any, length: Any) -> float | np.ndarray:
    """Gain G(m) = Δ_f / Δ̄_m = m^*·Γ_m / (m·M) of seed 003 §III-C (eq. (5): 1 ≤ G(m) ≤ L·m^*/M)."""
    prof = CountProfile.from_counts(counts)
    m, scalar = _lengths(length)
    g = prof.max_count * prof.gamma(m) / (m * float(prof.total))
    return float(g[0]) if scalar else g


def max_gain(counts: Any) -> float:
    """G_max = L·m^*/M, the gain at m = m_* (eq. (5))."""
    prof = CountProfile.from_counts(counts)
    return prof.num_users * prof.max_count / prof.total


# --------------------------------------------------------------------------- result


@dataclass(frozen=True, eq=False)
class ArrayLengthPlan:
    """A chosen array length and its worst-case error (:func:`optimal_array_length`).

    Attributes
    ----------
    length : int
        The array length m.
    error : float
        Exact worst-case error E_ε(m) of eq. (15) at ``length`` (whatever the method optimised).
    bias, noise : float
        Its two terms U(1 − Γ_m/M) and U·m/(ε·Γ_m).
    retained_total : int
        Γ_m = Σ_ℓ min{m_ℓ, m}.
    method, solver : str
        What chose m, and how.
    status : Status
        ``OPTIMAL`` when the method's own problem was solved to optimality.
    objective : float
        The method's criterion at ``length``: E_ε(m) (exact), F_ε(m) (surrogate), Γ_m/√m
        (heuristic), ``nan`` (median).
    optimal_length, optimal_error : int, float
        m_UB(ε) (smallest exact minimiser) and E*_ε = E_ε(m_UB), for comparison.
    gap : float
        Relative gap reported by the solver: 0 where solved to optimality (and for the closed forms
        and scans), inf where a limit stopped a solve that reports none.
    """

    length: int
    error: float
    bias: float
    noise: float
    retained_total: int
    method: str
    solver: str
    status: Status
    objective: float
    optimal_length: int
    optimal_error: float
    bound: float
    epsilon: float
    num_users: int
    total_samples: int
    gap: float = 0.0

    def __repr__(self) -> str:
        return (f"ArrayLengthPlan(length={self.length}, error={self.error:.6g} (bias {self.bias:.6g} + noise "
                f"{self.noise:.6g}), method={self.method!r}/{self.solver!r}, status={self.status.value}, "
                f"optimal_length={self.optimal_length}, excess={self.excess:.3g})")

    @property
    def excess(self) -> float:
        """E_ε(length) − E*_ε ≥ 0: how much worse than the exact minimax length."""
        return self.error - self.optimal_error

    @property
    def wrap_around_arrays(self) -> int:
        """K^WA = ⌊Γ_m / m⌋ (eq. (3))."""
        return self.retained_total // self.length

    def summary(self) -> dict[str, Any]:
        """A JSON-ready digest (used by the CLI and :func:`dpopt.sweep`)."""
        return {
            "method": self.method, "solver": self.solver, "status": Status(self.status).value,
            "length": self.length, "error": self.error, "bias": self.bias, "noise": self.noise,
            "objective": self.objective, "optimal_length": self.optimal_length,
            "optimal_error": self.optimal_error, "excess": self.excess, "gap": self.gap,
            "num_users": self.num_users, "total_samples": self.total_samples,
            "retained_total": self.retained_total, "bound": self.bound, "epsilon": self.epsilon,
        }

    def to_frame(self) -> Any:
        """A one-row pandas DataFrame of :meth:`summary` (pandas imported on use)."""
        from .._frames import frame

        return frame([self.summary()])


# --------------------------------------------------------------------------- exact


def _first_min(err: np.ndarray, axis: int = -1) -> np.ndarray:
    """Index of the first entry within TIE_RTOL of the minimum (along ``axis``)."""
    lo = np.min(err, axis=axis, keepdims=True)
    return np.argmax(err <= lo + TIE_RTOL * np.abs(lo), axis=axis)


def _exact_enumeration(prof: CountProfile, U: float, eps: float) -> tuple[int, float]:
    v = prof.values
    err = _error(prof, v, prof.gamma_at_values(), U, eps)
    j = int(_first_min(err))
    return int(v[j]), float(err[j])


def _exact_scan(prof: CountProfile, U: float, eps: float, chunk: int = 1 << 20,
                deadline: float | None = None) -> tuple[int, float, bool]:
    """Every integer of [m_*, m^*] (the check of Lemma V.2), in chunks, until ``deadline``
    (:func:`time.perf_counter`): (m, its error, whether every integer was scanned)."""
    best_m, best_e = -1, math.inf
    for lo in range(prof.min_count, prof.max_count + 1, chunk):
        m = np.arange(lo, min(lo + chunk, prof.max_count + 1), dtype=np.int64)
        err = _error(prof, m, prof.gamma(m), U, eps)
        j = int(_first_min(err))
        if best_m < 0 or err[j] < best_e - TIE_RTOL * abs(best_e):
            best_m, best_e = int(m[j]), float(err[j])
        if deadline is not None and time.perf_counter() > deadline and lo + chunk <= prof.max_count:
            return best_m, best_e, False
    return best_m, best_e, True


def exact_length_path(counts: Any, bound: float, epsilons: Any) -> np.ndarray:
    """m_UB(ε) (smallest minimiser of eq. (15)) for many ε at once (Figure 5 of seed 003).

    Parameters
    ----------
    counts : array-like of int, shape (L,)
    bound : float
        U > 0.
    epsilons : float or array-like of float
        Positive privacy parameters (any order).

    Returns
    -------
    ndarray of int, shape (n,)
        m_UB(ε) for each ε (1-D even for a scalar); non-decreasing in ε (Lemma V.3).
    """
    U = check_bound(bound)
    eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
    if eps.ndim != 1 or eps.size == 0 or not np.all(np.isfinite(eps)) or np.any(eps <= 0):
        raise DpoptInputError(f"`epsilons` must be a non-empty 1-D array of positive finite numbers; got {epsilons!r}")
    prof = CountProfile.from_counts(counts)
    v = prof.values
    # E_ε(v) = bias + (noise at ε = 1)/ε: evaluate the ε-free parts once
    bias, ratio = _error_from_gamma(prof.gamma_at_values(), v, prof.total, U, 1.0)
    out = np.empty(eps.size, dtype=np.int64)
    step = max(1, (1 << 22) // max(1, v.size))
    for lo in range(0, eps.size, step):
        e = eps[lo : lo + step, None]
        out[lo : lo + step] = prof.values[_first_min(bias[None, :] + ratio[None, :] / e, axis=1)]
    return out


def array_length_milp(counts: Any, bound: float, epsilon: float) -> LinearModel:
    """The exact problem (13) as a MILP: choose one candidate m among the distinct counts.

    Variables: binary z_j (one per distinct count v_j, cost E_ε(v_j)), and the continuous read-outs
    ``length`` = Σ v_j z_j and ``gamma`` = Σ Γ_{v_j} z_j. Constraint Σ z_j = 1. By Lemma V.2 its
    optimum equals min over all integers m ∈ [m_*, m^*] of E_ε(m). HiGHS's tolerances are absolute:
    where the errors are small (U ≈ 1) candidates a few 10⁻⁵ of themselves apart are one to its
    presolve (m = 199 at 0.0118561 was taken for m = 200 at 0.0118554), so :func:`optimal_array_length`
    solves it with the costs in units of the least of them (:func:`_in_error_units`).

    Returns
    -------
    LinearModel
    """
    U, eps, prof = _setup(counts, bound, epsilon)
    v = prof.values
    g = prof.gamma_at_values()
    J = v.size
    err = _error(prof, v, g, U, eps)
    b = ModelBuilder(name="array_length_milp")
    # names: choose_m<v> (one binary per candidate length v), length_m, gamma_total, one_all
    z = b.add_cols("choose", J, lower=0, upper=1, cost=err, integer=True, labels=[f"m{int(x)}" for x in v])
    length = b.add_cols("length", 1, lower=prof.min_count, upper=prof.max_count, labels=["m"])
    gamma = b.add_cols("gamma", 1, lower=0, upper=prof.total, labels=["total"])
    b.add_rows("one", rows=np.zeros(J), cols=z, vals=1.0, lower=1, upper=1, count=1, labels=["all"])
    # read-outs: length = Σ_j v_j z_j, gamma = Σ_j Γ_{v_j} z_j
    for name, col, coef in (("length_link", length, v), ("gamma_link", gamma, g)):
        b.add_rows(
            name,
            rows=np.zeros(J + 1),
            cols=np.r_[z, col],
            vals=np.r_[-coef.astype(float), 1.0],
            lower=0,
            upper=0,
            count=1,
            labels=["row"],
        )
    return b.build()


# --------------------------------------------------------------------------- surrogate (19)


def surrogate_objective(counts: Any, bound: float, epsilon: float, length: Any) -> float | np.ndarray:
    """F_ε(m) = U(1 − Γ_m/M) + U·m/(ε·L·m_*), problem (19) as reconstructed (ERRATA E7).

    F_ε ≥ E_ε on [m_*, m^*] (it replaces Γ_m in the noise term by its lower bound L·m_*).
    """
    U, eps, prof = _setup(counts, bound, epsilon)
    m = np.atleast_1d(np.asarray(length, dtype=float))
    if not np.all(np.isfinite(m)) or np.any(m <= 0):
        raise DpoptInputError(f"`length` must hold positive finite numbers; got {_show(length)}")
    f = U * (1.0 - prof.gamma(m) / prof.total) + U * m / (eps * prof.num_users * prof.min_count)
    return float(f[0]) if np.ndim(length) == 0 else f


def _surrogate_k(prof: CountProfile, eps: float) -> float:
    return prof.total / (eps * prof.num_users * prof.min_count)


def surrogate_length(counts: Any, epsilon: float) -> int:
    """Closed-form minimiser of (19) (ERRATA E7): the (⌊k⌋+1)-th largest m_ℓ, k = M/(ε·L·m_*).

    F_ε is convex piecewise linear with slope −(U/M)·#{ℓ : m_ℓ > m} + U/(ε·L·m_*) between kinks, so
    it stops decreasing at the first kink (from above) where #{ℓ : m_ℓ > m} ≤ k. Returns m_* when
    ⌊k⌋+1 > L and m^* when k < 1; for integer k every point of [m_(k+1), m_(k)] is optimal and the
    smallest is returned. The result does not depend on U.

    Parameters
    ----------
    counts : array-like of int, shape (L,)
        Samples per user m_ℓ ≥ 1 (public).
    epsilon : float
        Privacy parameter ε > 0.

    Returns
    -------
    int
        The smallest minimiser of F_ε over [m_*, m^*], one of the counts m_ℓ.

    Raises
    ------
    DpoptInputError
        If ``counts`` is not a non-empty 1-D array of whole numbers ≥ 1, or ``epsilon`` is not a positive finite
        number ≤ 1e100.
    """
    eps = check_epsilon(epsilon)
    prof = CountProfile.from_counts(counts)
    r = math.floor(_surrogate_k(prof, eps)) + 1
    return prof.min_count if r > prof.num_users else prof.kth_largest(r)


def paper_kkt_length(counts: Any, bound: float, epsilon: float) -> float:
    """The paper's literal KKT procedure for (19) (Lemma VI.2 + step (ii)); wrong at kinks (ERRATA E7).

    (i) if k = M/(ε·L·m_*) is an integer with 1 ≤ k < L, return m_(k+1) (any point of
    [m_(k+1), m_(k)] would do); (ii) otherwise return the better of the two end points m_*, m^*
    under F_ε. Kept to exhibit the erratum: for non-integer k the true minimiser is an interior kink.
    """
    U, eps, prof = _setup(counts, bound, epsilon)
    k = _surrogate_k(prof, eps)
    if float(k).is_integer() and 1 <= k < prof.num_users:
        return float(prof.kth_largest(int(k) + 1))
    ends = np.array([prof.min_count, prof.max_count], dtype=float)
    f = surrogate_objective(prof.sorted_counts, U, eps, ends)
    return float(ends[int(np.argmin(f))])


def surrogate_lp(counts: Any, bound: float, epsilon: float) -> LinearModel:
    """Problem (19) as an LP (hypograph of the concave Γ_m = Σ_ℓ min{m_ℓ, m}).

    maximise Σ_ℓ g_ℓ is written per distinct count v_j with multiplicity w_j::

        minimise   U − (U/M)·Σ_j w_j·g_j + U/(ε·L·m_*)·m
        subject to g_j − m ≤ 0,   0 ≤ g_j ≤ v_j,   m_* ≤ m ≤ m^*

    At an optimum g_j = min{v_j, m}, so the LP value is min F_ε. Column blocks ``length`` (m) and
    ``kept`` (g); row block ``cap`` (g_j ≤ m). Names: ``length_m``, ``kept_c<v_j>``, ``cap_c<v_j>``
    (one per distinct count v_j); the dual of ``cap_c<v_j>`` is the marginal value of raising
    the cap g_j ≤ m, i.e. −∂F/∂m contributed by the users with count v_j.

    Returns
    -------
    LinearModel
    """
    U, eps, prof = _setup(counts, bound, epsilon)
    v = prof.values
    w = np.diff(np.r_[prof.first, prof.num_users])
    J = v.size
    b = ModelBuilder(name="array_length_surrogate_lp")
    b.offset = U
    m = b.add_cols(
        "length",
        1,
        lower=prof.min_count,
        upper=prof.max_count,
        cost=U / (eps * prof.num_users * prof.min_count),
        labels=["m"],
    )
    levels = [f"c{int(x)}" for x in v]  # one per distinct count (level) v_j
    g = b.add_cols("kept", J, lower=0.0, upper=v.astype(float), cost=-U * w / prof.total, labels=levels)
    rows = np.arange(J)
    b.add_rows(
        "cap",
        rows=np.r_[rows, rows],
        cols=np.r_[g, np.full(J, m[0])],
        vals=np.r_[np.ones(J), -np.ones(J)],
        lower=-np.inf,
        upper=0.0,
        count=J,
        labels=levels,
    )
    return b.build()


# --------------------------------------------------------------------------- heuristics


def heuristic_length(counts: Any, *, low: int | None = None, high: int | None = None) -> int:
    """Heuristic (9) of seed 003: the smallest maximiser of √m·Γ_m/m = Γ_m/√m over integers in [low, high].

    Default range [m_*, m^*] (the authors' code searched [P10, P90) of the counts: pass ``low``/``high``).
    Between consecutive distinct counts Γ_m = t·m + c, so Γ_m/√m = t·x + c/x with x = √m is convex
    in x: the maximum over the range is attained at a distinct count or at an end of the range, and
    only those are evaluated (:func:`optimal_array_length` with ``solver="scan"`` checks every integer).

    Parameters
    ----------
    counts : array-like of int, shape (L,)
        Samples per user m_ℓ ≥ 1 (public).
    low, high : int, optional, keyword-only
        The search range [low, high], integers ≥ 1 with ``low ≤ high`` (it may extend beyond the counts).
        Default None: m_* and m^*.

    Returns
    -------
    int
        The smallest maximiser of Γ_m/√m over the integers of [low, high] (independent of U and ε).

    Raises
    ------
    DpoptInputError
        If ``counts`` is not a non-empty 1-D array of whole numbers ≥ 1, ``low`` or ``high`` is not an
        integer ≥ 1, or ``low > high``.
    """
    prof = CountProfile.from_counts(counts)
    lo, hi = _heuristic_range(prof, low, high)
    v = prof.values
    cand = np.unique(np.r_[lo, v[(v >= lo) & (v <= hi)], hi]).astype(np.int64)
    val = prof.gamma(cand) / np.sqrt(cand)
    return int(cand[int(np.argmax(val))])


def _heuristic_range(prof: CountProfile, low: int | None, high: int | None) -> tuple[int, int]:
    lo = prof.min_count if low is None else check_positive_int(low, "low")
    hi = prof.max_count if high is None else check_positive_int(high, "high")
    if lo > hi:
        raise DpoptInputError(f"`low` must not exceed `high`; got low={lo}, high={hi}")
    return lo, hi


def _heuristic_scan(prof: CountProfile, lo: int, hi: int, chunk: int = 1 << 20, deadline: float | None = None
                    ) -> tuple[int, bool]:
    """argmax Γ_m/√m over every integer of [lo, hi], in chunks, until ``deadline``: (m, whether every
    integer was scanned)."""
    best_m, best_v = lo, -math.inf
    for a in range(lo, hi + 1, chunk):
        m = np.arange(a, min(a + chunk, hi + 1), dtype=np.int64)
        v = prof.gamma(m) / np.sqrt(m)
        j = int(np.argmax(v))
        if v[j] > best_v:
            best_m, best_v = int(m[j]), float(v[j])
        if deadline is not None and time.perf_counter() > deadline and a + chunk <= hi:
            return best_m, False
    return best_m, True


def median_length(counts: Any) -> int:
    """The median choice of seed 003 (Lemma III.2): the lower median of {m_ℓ}, an element of the counts.

    At least half of the users have m_ℓ ≥ it, which gives G(m) ≥ G_max/2.

    Parameters
    ----------
    counts : array-like of int, shape (L,)
        Samples per user m_ℓ ≥ 1 (public).

    Returns
    -------
    int
        The ⌊(L − 1)/2⌋-th smallest count (0-based): the middle count for odd L, the smaller of the
        two middle counts for even L (independent of U and ε).

    Raises
    ------
    DpoptInputError
        If ``counts`` is not a non-empty 1-D array of whole numbers ≥ 1.
    """
    prof = CountProfile.from_counts(counts)
    return int(prof.sorted_counts[(prof.num_users - 1) // 2])


# --------------------------------------------------------------------------- thresholds


def switch_points(counts: Any) -> tuple[float, float]:
    """Exact thresholds of Corollary V.1: (ε_lo, ε_hi) with m_UB(ε) = m_* iff ε ≤ ε_lo and
    m_UB(ε) = m^* iff ε > ε_hi (m_UB = smallest minimiser of (15); independent of U).

    With h(m) = m/Γ_m: ε_lo = min_{m > m_*} M·(h(m) − h(m_*)) / (Γ_m − Γ_{m_*}) and
    ε_hi = max_{m < m^*} M·(h(m^*) − h(m)) / (M − Γ_m), m over the distinct counts (Lemma V.2).
    Returns (inf, 0) when all counts are equal.

    Parameters
    ----------
    counts : array-like of int, shape (L,)
        Samples per user m_ℓ ≥ 1 (public).

    Returns
    -------
    tuple of float
        (ε_lo, ε_hi), 0 < ε_lo ≤ ε_hi; ``(inf, 0.0)`` when all counts are equal (m_* = m^*: every ε gives
        that length).

    Raises
    ------
    DpoptInputError
        If ``counts`` is not a non-empty 1-D array of whole numbers ≥ 1.
    """
    prof = CountProfile.from_counts(counts)
    v = prof.values.astype(float)
    if v.size == 1:
        return math.inf, 0.0
    g = prof.gamma_at_values().astype(float)
    h = v / g
    M = float(prof.total)
    lo = float(np.min(M * (h[1:] - h[0]) / (g[1:] - g[0])))
    hi = float(np.max(M * (h[-1] - h[:-1]) / (M - g[:-1])))
    return lo, hi


def lemma_v4_thresholds(counts: Any) -> tuple[float, float]:
    """Sufficient thresholds of Lemma V.4 (as derived in the notes): (ε_1, ε_2).

    ε_1 = n_*/(L·(L − n_*)) with n_* = #{ℓ : m_ℓ = m_*}: m_UB(ε) = m_* for ε ≤ ε_1;
    ε_2 = 1/n^* with n^* = #{ℓ : m_ℓ = m^*}: m_UB(ε) = m^* for ε ≥ ε_2.
    ε_1 = inf when all counts are equal.
    """
    prof = CountProfile.from_counts(counts)
    L = prof.num_users
    n_lo = int(np.count_nonzero(prof.sorted_counts == prof.min_count))
    n_hi = int(np.count_nonzero(prof.sorted_counts == prof.max_count))
    eps1 = math.inf if n_lo == L else n_lo / (L * (L - n_lo))
    return eps1, 1.0 / n_hi


# --------------------------------------------------------------------------- entry point


def optimal_array_length(counts: Any, bound: float, epsilon: float, *, method: Method = "exact",
                         solver: str | None = None, time_limit: float | None = None, low: int | None = None,
                         high: int | None = None, options: Mapping[str, Any] | None = None) -> ArrayLengthPlan:
    """Choose the array length m of pseudo-user Array-Averaging (seed 003).

    Parameters
    ----------
    counts : array-like of int, shape (L,)
        Samples per user m_ℓ ≥ 1 (public).
    bound, epsilon : float
        Sample bound U > 0 and privacy parameter ε > 0.
    method : {"exact", "surrogate", "heuristic", "median"}, keyword-only
        ``"exact"``: m_UB(ε), the smallest minimiser of E_ε (eq. (13), Lemma V.2).
        ``"surrogate"``: minimiser of the convex problem (19) (ERRATA E7).
        ``"heuristic"``: eq. (9), maximise Γ_m/√m on [low, high] (default [m_*, m^*]).
        ``"median"``: the lower median of the counts (Lemma III.2).
    solver : str, keyword-only
        exact: ``"enumeration"`` (default; O(L log L)), ``"scan"`` (every integer in [m_*, m^*]) or
        ``"milp"`` (HiGHS); surrogate: ``"closed-form"`` (default) or ``"lp"`` (HiGHS); heuristic:
        ``"enumeration"`` (default) or ``"scan"``.
    time_limit : float, keyword-only
        Total seconds for the solve, a hard bound (HiGHS solvers only, :func:`dpopt.solve.solve_bounded`;
        the exact enumeration used for comparison is not limited).
    low, high : int, keyword-only
        Search range of the heuristic (9).
    options : mapping, keyword-only
        HiGHS options (HiGHS solvers only).

    Returns
    -------
    ArrayLengthPlan
        ``length``, its exact worst-case ``error`` and terms, ``status``, and the exact optimum
        ``optimal_length``/``optimal_error`` with ``excess = error − optimal_error``. If a HiGHS
        solver returns no point (``status`` not ``OPTIMAL``, ``objective`` nan), ``length`` falls back
        to the enumeration (exact) or closed form (surrogate); check ``status``.

    Examples
    --------
    >>> plan = optimal_array_length([1, 2, 3, 50], 1.0, 1.0)
    >>> plan.length, round(plan.error, 4)
    (50, 0.8929)
    >>> optimal_array_length([1, 2, 3, 50], 1.0, 0.1).length
    1
    """
    method = check_choice(method, "method", _METHODS)  # type: ignore[assignment]
    choices = _SOLVERS[method]
    solver = choices[0] if solver is None else check_choice(solver, "solver", choices)
    U, eps, prof = _setup(counts, bound, epsilon)
    time_limit = None if time_limit is None else check_nonnegative_float(time_limit, "time_limit")
    m_opt, e_opt = _exact_enumeration(prof, U, eps)
    m, objective, status, gap = _choose_length(method, solver, prof, U, eps, m_opt, e_opt, low=low, high=high,
                                               time_limit=time_limit, options=options)
    gam = int(prof.gamma(np.int64(m)))
    bias, noise = _error_from_gamma(np.array([gam]), np.array([m]), prof.total, U, eps)
    return ArrayLengthPlan(
        length=int(m), error=float(bias[0] + noise[0]), bias=float(bias[0]), noise=float(noise[0]),
        retained_total=gam, method=method, solver=solver, status=status, objective=objective,
        optimal_length=m_opt, optimal_error=e_opt, bound=U, epsilon=eps, num_users=prof.num_users,
        total_samples=prof.total, gap=gap,
    )


def _choose_length(method: str, solver: str, prof: CountProfile, U: float, eps: float, m_opt: int, e_opt: float, *,
                   low: int | None, high: int | None, time_limit: float | None,
                   options: Mapping[str, Any] | None) -> tuple[int, float, Status, float]:
    """The length ``method`` chooses with ``solver`` (:func:`optimal_array_length`); returns
    (m, objective, status, gap)."""
    status, gap, objective = Status.OPTIMAL, 0.0, math.nan
    if method == "exact":
        m, objective, status, gap = _exact_choice(prof, U, eps, solver, m_opt, e_opt, time_limit=time_limit,
                                                  options=options)
    elif method == "surrogate":
        m, objective, status, gap = _surrogate_choice(prof, U, eps, solver, time_limit=time_limit, options=options)
    elif method == "heuristic":
        lo, hi = _heuristic_range(prof, low, high)
        if solver == "scan":
            m, done = _heuristic_scan(prof, lo, hi, deadline=_deadline(time_limit))
            status, gap = (Status.OPTIMAL, 0.0) if done else (Status.TIME_LIMIT, math.inf)
        else:
            m = heuristic_length(prof.sorted_counts, low=lo, high=hi)
        objective = float(prof.gamma(m) / math.sqrt(m))
    else:
        m = median_length(prof.sorted_counts)
    return m, objective, status, gap


def _exact_choice(prof: CountProfile, U: float, eps: float, solver: str, m_opt: int, e_opt: float, *,
                  time_limit: float | None, options: Mapping[str, Any] | None) -> tuple[int, float, Status, float]:
    """m_UB(ε) by ``solver`` (``m_opt``, ``e_opt``: the enumeration's answer); returns (m, objective,
    status, gap). A MILP without a point falls back to ``m_opt`` (objective nan)."""
    if solver == "enumeration":
        return m_opt, e_opt, Status.OPTIMAL, 0.0
    if solver == "scan":
        m, objective, done = _exact_scan(prof, U, eps, deadline=_deadline(time_limit))
        return (m, objective, Status.OPTIMAL, 0.0) if done else (m, objective, Status.TIME_LIMIT, math.inf)
    from ..solve import solve_bounded as solve

    # gap tolerances 0 (HiGHS's default relative gap 1e-4 would accept a candidate that far above the best)
    res = solve(_in_error_units(array_length_milp(prof.sorted_counts, U, eps)), time_limit=time_limit,
                options={"mip_rel_gap": 0.0, "mip_abs_gap": 0.0, **solver_options(options)})
    if res.x is None:
        return m_opt, math.nan, res.status, float(res.gap)
    m = int(prof.values[int(np.argmax(res.value("choose")))])
    objective = float(_error(prof, np.array([m]), prof.gamma(np.array([m])), U, eps)[0])  # the model's is in units
    return m, objective, res.status, float(res.gap)


def _deadline(time_limit: float | None) -> float | None:
    """The :func:`time.perf_counter` at which a scan stops (None: no limit)."""
    return None if time_limit is None else time.perf_counter() + time_limit


def _in_error_units(model: LinearModel) -> LinearModel:
    """:func:`array_length_milp` with its costs divided by the least (positive) one: the same choice,
    the objective in units of the least candidate error, differences clear of HiGHS's absolute
    tolerances (a scaling of the objective, never the answer)."""
    import dataclasses

    cost = model.c.copy()
    block = model.col_blocks["choose"]
    unit = float(np.min(cost[block]))
    if not (math.isfinite(unit) and unit > 0):
        return model
    cost[block] = cost[block] / unit
    return dataclasses.replace(model, c=cost)


def _surrogate_choice(prof: CountProfile, U: float, eps: float, solver: str, *, time_limit: float | None,
                      options: Mapping[str, Any] | None) -> tuple[int, float, Status, float]:
    """The minimiser of (19) by ``solver``; returns (m, objective, status, gap). An LP without a point
    falls back to the closed form (objective nan); a gap the LP does not report is inf unless it is
    optimal (a limit proves nothing)."""
    if solver == "closed-form":
        m = surrogate_length(prof.sorted_counts, eps)
        return m, float(surrogate_objective(prof.sorted_counts, U, eps, m)), Status.OPTIMAL, 0.0
    from ..solve import solve_bounded as solve

    # solved in units of U: F scales with U (every cost and the offset are U times a number), so its
    # minimiser does not depend on U and its value is U times the value at bound 1. At U = 1e-6 the
    # costs sat below HiGHS's 1e-7 dual tolerance and an "optimal" m = 9 had 21× the minimum (a fuzz run).
    res = solve(surrogate_lp(prof.sorted_counts, 1.0, eps), time_limit=time_limit, options=options)
    gap = res.proven_gap
    if res.x is None:
        return surrogate_length(prof.sorted_counts, eps), math.nan, res.status, gap
    m_lp = float(res.value("length")[0])
    return int(round(m_lp)), U * float(res.objective), res.status, gap
