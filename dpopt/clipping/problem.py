"""Custom clipping problems as cvxpy models with named variables (solved with HiGHS).

:func:`clipping_problem` returns a :class:`ClippingProblem` (a ``cvxpy.Problem``) whose variables a
researcher can constrain further. The base model is the per-user clipping LP of seeds 000/001 with
the *exact* worst-case bias (ERRATA E9) — no symmetry is assumed, so fixed or capped intervals
are priced correctly::

    minimise    bias + d·sensitivity/ε
    variables   lower[ℓ] = a_ℓ, upper[ℓ] = b_ℓ      0 ≤ a_ℓ ≤ b_ℓ ≤ U_ℓ
                user_bias[ℓ] ≥ m_ℓ·max{a_ℓ, U_ℓ − b_ℓ}/n    (user ℓ's worst-case bias share)
                bias, sensitivity
    d = 1:      bias ≥ Σ m_ℓ(U_ℓ − b_ℓ)/n,  bias ≥ Σ m_ℓ a_ℓ/n      (seed 000 Lemma III.1, exact)
                sensitivity ≥ m_ℓ(b_ℓ − a_ℓ)/n                      (seed 000 eq. (6))
    d ≥ 2:      bias ≥ Σ user_bias                                  (seed 001 Lemma III.2)
                sensitivity ≥ 2·m_ℓ·b_ℓ/n                           (ℓ1 diameter 2b: ERRATA E3)

Built-in variants (each reduces to the base problem when its constraint is slack):

* ``user_bounds`` — heterogeneous ranges: user ℓ's samples lie in ``[0, U_ℓ]`` (``‖x‖₁ ≤ U_ℓ``);
* ``bias_cap`` — ``user_bias[ℓ] ≤ cap`` for every user (no user may carry more bias than cap);
* ``fixed`` — ``{ℓ: (a, b)}``: prescribed intervals for chosen users;
* ``dim ≥ 2`` — the d-dimensional ℓ1 case with the corrected sensitivity.

Add your own constraints with :meth:`ClippingProblem.with_constraints` and solve with
:meth:`ClippingProblem.solve_plan` (HiGHS through cvxpy).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import cvxpy as cp
import numpy as np

from .._validation import (
    DpoptInputError,
    as_counts,
    check_bound,
    check_dim,
    check_epsilon,
    check_nonnegative_float,
)
from ..solve.cvxpy_backend import from_cvxpy, solve_cvxpy
from .closed_form import ClippingPlan

__all__ = ["ClippingProblem", "clipping_problem", "solve_problem", "export_problem"]


#: the data a ClippingProblem remembers besides its cvxpy model
_META = ("counts", "bound", "user_bounds", "epsilon", "dim")


def _variable(name: str, doc: str) -> property:
    """A read-only property returning the problem's cvxpy variable ``name``."""

    def get(self: cp.Problem) -> cp.Variable:
        return self.var_dict[name]

    return property(get, doc=doc)


class ClippingProblem(cp.Problem):
    """A ``cvxpy.Problem`` for per-user clipping that remembers its data.

    Named variables: ``lower``, ``upper``, ``user_bias`` (length L), ``bias``, ``sensitivity``
    (scalars); also reachable as ``problem.var_dict[name]``. Attributes ``counts``, ``bound``,
    ``user_bounds``, ``epsilon``, ``dim``.
    """

    counts: np.ndarray
    bound: float
    user_bounds: np.ndarray
    epsilon: float
    dim: int

    def _attach(self, src: Mapping[str, Any]) -> ClippingProblem:
        for key in _META:
            setattr(self, key, src[key])
        return self

    def _meta(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _META}

    lower = _variable("lower", "a_ℓ, the lower clipping bounds (cp.Variable)")
    upper = _variable("upper", "b_ℓ, the upper clipping bounds (cp.Variable)")
    user_bias = _variable("user_bias", "user ℓ's worst-case bias share (cp.Variable)")
    bias = _variable("bias", "the worst-case bias (cp.Variable)")
    sensitivity = _variable("sensitivity", "the sensitivity Δ of the clipped mean (cp.Variable)")

    def with_constraints(self, *constraints: cp.Constraint | Iterable[cp.Constraint]) -> ClippingProblem:
        """A new problem with extra constraints on the named variables."""
        extra: list[cp.Constraint] = []
        for c in constraints:
            extra.extend(c if isinstance(c, (list, tuple)) else [c])
        return ClippingProblem(self.objective, list(self.constraints) + extra)._attach(self._meta())

    def export(self, path: str) -> Any:
        """Write the model to ``.mps``/``.lp`` (see :func:`export_problem`)."""
        return export_problem(self, path)

    def solve_plan(
        self, *, time_limit: float | None = None, options: Mapping[str, Any] | None = None
    ) -> ClippingPlan:
        """Solve with HiGHS (through cvxpy); see :func:`solve_problem`."""
        return solve_problem(self, time_limit=time_limit, options=options)


def _as_user_bounds(user_bounds: Any, L: int, U: float) -> np.ndarray:
    if user_bounds is None:
        return np.full(L, U)
    arr = np.asarray(user_bounds, dtype=float)
    if arr.ndim == 0:
        arr = np.full(L, float(arr))
    if arr.shape != (L,):
        raise DpoptInputError(f"`user_bounds` must be a number or have the shape of `counts` ({L},); "
                              f"got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0) or np.any(arr > U):
        raise DpoptInputError(f"`user_bounds` must hold finite numbers in (0, bound] = (0, {U:g}]; "
                              f"got {arr[:6]}{' ...' if L > 6 else ''}")
    return arr


def _as_fixed(fixed: Mapping[int, tuple[float, float]] | None, L: int, Ub: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if fixed is None or len(fixed) == 0:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    if not isinstance(fixed, Mapping):
        raise DpoptInputError(f"`fixed` must be a mapping {{user index: (lower, upper)}}; got {fixed!r}")
    idx, lo, hi = [], [], []
    for key, pair in fixed.items():
        if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer)) or not 0 <= key < L:
            raise DpoptInputError(f"`fixed` keys must be user indices in 0..{L - 1}; got {key!r}")
        try:
            a, b = (float(v) for v in pair)
        except (TypeError, ValueError):
            raise DpoptInputError(f"`fixed[{key}]` must be a pair (lower, upper); got {pair!r}") from None
        if not (0.0 <= a <= b <= Ub[key]):
            raise DpoptInputError(f"`fixed[{key}]` must satisfy 0 <= lower <= upper <= {Ub[key]:g}; "
                                  f"got {pair!r}")
        idx.append(int(key))
        lo.append(a)
        hi.append(b)
    return np.asarray(idx, np.int64), np.asarray(lo), np.asarray(hi)


def clipping_problem(
    counts: Any,
    bound: float,
    epsilon: float,
    *,
    dim: int = 1,
    user_bounds: Any = None,
    bias_cap: float | None = None,
    fixed: Mapping[int, tuple[float, float]] | None = None,
) -> ClippingProblem:
    """The per-user clipping LP as a cvxpy model with named variables (module docstring).

    Parameters
    ----------
    counts : array_like of int
        ``m_ℓ ≥ 1``.
    bound : float
        U; every ``user_bounds[ℓ]`` must lie in ``(0, U]``.
    epsilon : float
        ε of the Laplace release.
    dim : int
        d ≥ 1 (d ≥ 2: ℓ1-bounded non-negative samples, corrected sensitivity of ERRATA E3).
    user_bounds : float or array_like, optional
        ``U_ℓ``: user ℓ's samples lie in ``[0, U_ℓ]`` (default U for all). Like the counts they must
        be public (chosen without looking at the samples): the intervals depend on them. The
        sensitivity does not rely on them (clipped samples lie in ``[a_ℓ, b_ℓ]`` whatever the
        data), only the bias does.
    bias_cap : float, optional
        Upper bound on each user's worst-case bias share ``m_ℓ·max{a_ℓ, U_ℓ − b_ℓ}/n``.
    fixed : mapping, optional
        ``{ℓ: (a, b)}`` fixes user ℓ's interval.

    Returns
    -------
    ClippingProblem
        Unsolved; call ``.solve_plan()`` or ``dpopt.solve.cvxpy_backend.solve_cvxpy(problem)``.

    Notes
    -----
    With no variant and U_ℓ = U the optimum is ``E^OPT(ε)`` (d = 1) or ``2·E^OPT(ε)`` (d ≥ 2). With
    heterogeneous ``U_ℓ`` (d = 1) the closed form holds with ``{U_ℓ m_ℓ}`` in place of ``{U m_ℓ}``
    (the reduced LP is the same with right-hand sides ``U_ℓ m_ℓ``).
    """
    m = as_counts(counts)
    U = check_bound(bound)
    eps = check_epsilon(epsilon)
    d = check_dim(dim)
    L = m.size
    Ub = _as_user_bounds(user_bounds, L, U)
    cap = None if bias_cap is None else check_nonnegative_float(bias_cap, "bias_cap")
    fidx, flo, fhi = _as_fixed(fixed, L, Ub)
    n = float(m.sum())
    w = m.astype(float) / n  # m_ℓ/n

    a = cp.Variable(L, name="lower")
    b = cp.Variable(L, name="upper")
    ub = cp.Variable(L, name="user_bias")
    bias = cp.Variable(name="bias")
    sens = cp.Variable(name="sensitivity")
    cons: list[cp.Constraint] = [
        a >= 0,
        b >= a,
        b <= Ub,
        ub >= cp.multiply(w, a),
        ub >= cp.multiply(w, Ub - b),
    ]
    if d == 1:
        cons += [
            bias >= w @ (Ub - b),
            bias >= w @ a,
            sens >= cp.multiply(w, b - a),
        ]
    else:
        cons += [
            bias >= cp.sum(ub),
            sens >= 2.0 * cp.multiply(w, b),
        ]
    if cap is not None:
        cons.append(ub <= cap)
    if fidx.size:
        cons += [a[fidx] == flo, b[fidx] == fhi]
    prob = ClippingProblem(cp.Minimize(bias + d * sens / eps), cons)
    return prob._attach({"counts": m, "bound": U, "user_bounds": Ub, "epsilon": eps, "dim": d})


def interval_terms(counts: np.ndarray, user_bounds: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                   dim: int) -> tuple[float, float]:
    """Exact worst-case bias and ℓ1 sensitivity of per-user intervals with per-user ranges U_ℓ.

    d = 1 (seed 000 Lemma III.1, exact form, ERRATA E9): bias ``max{Σ m_ℓ(U_ℓ − b_ℓ),
    Σ m_ℓ a_ℓ}/n``, sensitivity ``max_ℓ m_ℓ(b_ℓ − a_ℓ)/n``; d ≥ 2 (seed 001 Lemma III.2, ERRATA E3):
    bias ``Σ m_ℓ max{a_ℓ, U_ℓ − b_ℓ}/n``, sensitivity ``max_ℓ 2 m_ℓ b_ℓ/n``.
    """
    w = counts / float(counts.sum())
    if dim == 1:
        return max(float(w @ (user_bounds - upper)), float(w @ lower)), float(np.max(w * (upper - lower)))
    return float(w @ np.maximum(lower, user_bounds - upper)), 2.0 * float(np.max(w * upper))


def solve_problem(
    problem: ClippingProblem,
    *,
    time_limit: float | None = None,
    options: Mapping[str, Any] | None = None,
) -> ClippingPlan:
    """Solve a :class:`ClippingProblem` with HiGHS (through cvxpy) and return a :class:`ClippingPlan`.

    ``bias``, ``sensitivity``: the larger of the named variable's value and the exact value for the
    returned intervals (:func:`interval_terms`), so the reported sensitivity is never below the true
    one even when the solver meets a constraint only to its tolerance; ``noise = d·Δ/ε``;
    ``error = bias + noise`` (``objective`` is the solver's optimum). ``certificate`` is None (custom problems have no closed form);
    ``info["result"]`` holds the :class:`~dpopt.solve.result.SolveResult`.
    """
    if not isinstance(problem, ClippingProblem):
        raise DpoptInputError(f"`problem` must be a ClippingProblem (from clipping_problem); got "
                              f"{type(problem).__name__}")
    res = solve_cvxpy(problem, time_limit=time_limit, options=options)
    L = problem.counts.size
    d, eps = problem.dim, problem.epsilon
    if res.x is None:
        nan = np.full(L, math.nan)
        return ClippingPlan(nan, nan, math.nan, math.nan, math.nan, math.nan, math.nan, None,
                            problem.bound, eps, d, method="lp", status=res.status,
                            formulation="custom", backend="cvxpy", solve_time=res.solve_time,
                            info={"result": res})
    lower = np.clip(np.asarray(problem.lower.value, float), 0.0, problem.user_bounds)
    upper = np.clip(np.asarray(problem.upper.value, float), lower, problem.user_bounds)
    # the release uses the returned intervals: never report less than their exact bias and
    # sensitivity (the solver meets its constraints only to its feasibility tolerance)
    exact_bias, exact_sens = interval_terms(problem.counts, problem.user_bounds, lower, upper, d)
    bias = max(float(problem.bias.value), exact_bias)
    sens = max(float(problem.sensitivity.value), exact_sens)
    n = float(problem.counts.sum())
    width = problem.counts * (upper if d >= 2 else upper - lower)
    return ClippingPlan(
        lower=lower,
        upper=upper,
        threshold=float(np.max(width)),
        error=bias + d * sens / eps,
        bias=bias,
        noise=d * sens / eps,
        sensitivity=sens,
        certificate=None,
        bound=problem.bound,
        epsilon=eps,
        dim=d,
        method="lp",
        status=res.status,
        formulation="custom",
        backend="cvxpy",
        objective=float(problem.value),
        solve_time=res.solve_time,
        info={"result": res, "n": n},
    )


def export_problem(problem: cp.Problem, path: Any) -> Any:
    """Write a (custom) clipping problem to ``.mps`` or ``.lp`` with HiGHS ``writeModel``.

    The file holds the standard form cvxpy hands to HiGHS (:func:`dpopt.solve.cvxpy_backend.from_cvxpy`);
    returns the path.
    """
    from ..solve import write_model

    return write_model(from_cvxpy(problem, name="clipping_custom"), path)
