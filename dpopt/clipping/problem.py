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
* ``dim ≥ 2`` — the d-dimensional ℓ1 case with the corrected sensitivity;
* ``geometry="cube"`` (d ≥ 2) — samples in ``[0, U_ℓ]^d``, each coordinate clipped to the user's
  interval: bias and sensitivity are d times the 1-D ones (models/clipping.md, "The cube"); the
  optimum is ``d·E^OPT(ε/d)`` (per-coordinate intervals gain nothing, by symmetry and convexity).

Objectives (``objective=``; or your own cvxpy expression through :meth:`ClippingProblem.with_objective`):

* ``"worst_case"`` — ``bias + d·Δ/ε``, the worst-case expected ℓ1 error (seeds 000/001);
* ``"mse"`` — ``bias² + 2d·(Δ/ε)²``: the worst-case mean squared error for d = 1 (Laplace variance
  2(Δ/ε)²); for d ≥ 2 an upper bound (squared ℓ2 bias ≤ squared ℓ1 bias). Convex; solved by a
  sequence of LPs in the slope of bias + s·Δ (:mod:`dpopt.clipping.parametric`), not a QP;
* ``"high_probability"`` — ``bias + Q_d(1 − β)·Δ/ε``: the error bound that holds with probability
  1 − β (``failure_probability``), Q_d the Gamma(d, 1) quantile (:func:`dpopt.laplace_l1_tail`).

Certificate: the plan optimises a convex function f(bias, Δ) over the convex set of achievable
(bias, Δ), so it is optimal iff it minimises the linearisation ``bias + s·Δ``, s = (∂f/∂Δ)/(∂f/∂bias)
at the plan (first-order condition): the worst-case problem at ε' = d/s, whose optimum the closed
form certifies with its KKT pair (ERRATA E4). Without variants and added constraints,
:func:`solve_problem` attaches that certificate when the plan's ``bias + s·Δ`` equals the closed
form's optimum at ε' (``info["certificate_epsilon"] = ε'``).

Add your own constraints with :meth:`ClippingProblem.with_constraints` and solve with
:meth:`ClippingProblem.solve_plan` (HiGHS through cvxpy).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import cvxpy as cp
import numpy as np

from .._validation import (DpoptInputError, _show, as_counts, check_bound, check_choice, check_dim, check_epsilon,
                           check_noise_scale, solver_seconds,
                           check_nonnegative_float)
from ..solve.cvxpy_backend import DataProblem, from_cvxpy, solve_cvxpy, named_variable
from ..solve.result import Status
from .closed_form import ClippingPlan

__all__ = ["ClippingProblem", "clipping_problem", "solve_problem", "export_problem"]


#: the data a ClippingProblem remembers besides its cvxpy model
_META = ("counts", "bound", "user_bounds", "inv_epsilon", "dim", "objective_name", "failure_probability", "variants",
         "geometry")
#: the largest noise cost d/ε a model takes: HiGHS reads 1e20 as infinite, and the high-probability
#: objective multiplies it by a Gamma quantile (tens to hundreds); ε = 1e-17 solves, 1e-19 ended in error
MAX_NOISE_COST = 1e17
#: the built-in objectives (module docstring)
OBJECTIVES = ("worst_case", "mse", "high_probability")
#: relative tolerance of the first-order certificate (the plan's linearised value vs the closed form;
#: relative, so the same at any U): the LPs meet it to about 10⁻¹⁵, the ``"mse"`` plan of
#: :mod:`.parametric` to its check's 10⁻⁷ (HiGHS's QP, used before, to 2.3·10⁻⁶ only)
CERTIFICATE_RTOL = 1e-6



class ClippingProblem(DataProblem):
    """A ``cvxpy.Problem`` for per-user clipping that remembers its data.

    Named variables: ``lower``, ``upper``, ``user_bias`` (length L), ``bias``, ``sensitivity``
    (scalars); also reachable as ``problem.var_dict[name]``. Attributes ``counts``, ``bound``,
    ``user_bounds``, ``epsilon``, ``dim``.
    """

    META = _META

    counts: np.ndarray
    bound: float
    user_bounds: np.ndarray
    #: 1/ε as a ``cp.Parameter`` (DPP): :meth:`set_epsilon` changes it, and a re-solve reuses
    #: cvxpy's compiled problem (a sweep over ε compiles once)
    inv_epsilon: cp.Parameter
    dim: int

    @property
    def epsilon(self) -> float:
        """ε of the Laplace release (the value of the ``inv_epsilon`` parameter, inverted)."""
        return 1.0 / float(self.inv_epsilon.value)

    def set_epsilon(self, epsilon: float) -> ClippingProblem:
        """Set ε in place (the parameter is shared by problems derived with ``with_*``); returns self."""
        self.inv_epsilon.value = 1.0 / _checked_epsilon(epsilon, self.dim, self.bound, self.counts)
        return self


    lower = named_variable("lower", "a_ℓ, the lower clipping bounds (cp.Variable)")
    upper = named_variable("upper", "b_ℓ, the upper clipping bounds (cp.Variable)")
    user_bias = named_variable("user_bias", "user ℓ's worst-case bias share (cp.Variable)")
    bias = named_variable("bias", "the worst-case bias (cp.Variable)")
    sensitivity = named_variable("sensitivity", "the sensitivity Δ of the clipped mean (cp.Variable)")

    def with_constraints(self, *constraints: cp.Constraint | Iterable[cp.Constraint]) -> ClippingProblem:
        """A new problem with extra constraints on the named variables."""
        extra = self._flattened(constraints)
        meta = {**self._meta(), "variants": self.variants + (("constraints",) if extra else ())}
        return ClippingProblem(self.objective, list(self.constraints) + extra)._attach(meta)

    def with_objective(self, objective: str | cp.Expression | cp.Minimize) -> ClippingProblem:
        """A new problem with another objective: a built-in name (:data:`OBJECTIVES`) or a convex
        cvxpy expression of the named variables (minimised; no certificate)."""
        if isinstance(objective, str):
            name = _check_objective(objective)
            goal = cp.Minimize(_objective_expr(name, self.bias, self.sensitivity, self.inv_epsilon, self.dim,
                                               self.failure_probability))
        elif isinstance(objective, cp.Maximize) or not isinstance(objective, (cp.Minimize, cp.Expression)):
            raise DpoptInputError(f"`objective` must be a built-in name ({', '.join(map(repr, OBJECTIVES))}), a convex "
                                  f"cvxpy expression to minimise or a cp.Minimize; got {_show(objective)}")
        else:
            name = "custom"
            goal = objective if isinstance(objective, cp.Minimize) else cp.Minimize(objective)
        return ClippingProblem(goal, list(self.constraints))._attach({**self._meta(), "objective_name": name})

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
    try:
        arr = np.asarray(user_bounds, dtype=float)
    except (TypeError, ValueError):
        raise DpoptInputError(f"`user_bounds` must be a number or an array of numbers; got {_show(user_bounds)}") from None
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


def _checked_epsilon(epsilon: Any, d: int, U: float, counts: np.ndarray) -> float:
    """ε checked, and refused where the model's largest noise coefficient 2d·U·max m/ε overflows."""
    eps = check_epsilon(epsilon)
    check_noise_scale(2.0 * d * U * float(np.max(counts, initial=1)), eps, f"2d·U·max m/ε at U = {U!r}")
    if d / eps > MAX_NOISE_COST:  # HiGHS reads a cost of 1e20 as infinite: status error, no plan
        raise DpoptInputError(f"`epsilon` must be at least {d / MAX_NOISE_COST:g} for the model (its noise cost d/ε "
                              f"must stay below HiGHS's infinity, 1e20); got {eps!r} (dpopt.optimal_clipping "
                              "holds at any ε)")
    return eps


def clipping_problem(counts: Any, bound: float, epsilon: float, *, dim: int = 1, user_bounds: Any = None,
                     bias_cap: float | None = None, fixed: Mapping[int, tuple[float, float]] | None = None,
                     objective: str = "worst_case", failure_probability: float = 0.05,
                     geometry: str = "l1") -> ClippingProblem:
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
    objective : {"worst_case", "mse", "high_probability"}
        What to minimise (module docstring).
    failure_probability : float
        β in (0, 1) of ``"high_probability"``.
    geometry : {"l1", "cube"}
        d ≥ 2: samples in the ℓ1 ball (default) or the cube (module docstring).

    Returns
    -------
    ClippingProblem
        Unsolved; call ``.solve_plan()`` or ``dpopt.solve.cvxpy_backend.solve_cvxpy(problem)``.

    Notes
    -----
    Without variants the optimum is ``E^OPT(ε)`` (d = 1) or ``2·E^OPT(ε)`` (d ≥ 2); the closed forms
    of the variants (e.g. ``{U_ℓ m_ℓ}`` for ``{U m_ℓ}``): models/clipping.md §5.
    """
    m = as_counts(counts)
    U = check_bound(bound)
    d = check_dim(dim)
    eps = _checked_epsilon(epsilon, d, U, m)
    L = m.size
    Ub = _as_user_bounds(user_bounds, L, U)
    cap = None if bias_cap is None else check_nonnegative_float(bias_cap, "bias_cap")
    fidx, flo, fhi = _as_fixed(fixed, L, Ub)
    geometry = check_choice(geometry, "geometry", ("l1", "cube"))
    a, b, ub, bias, sens, cons = _base_model(m, Ub, d, geometry)
    variants = _add_variants(cons, a, b, ub, cap=cap, fixed=(fidx, flo, fhi), own_bounds=bool(np.any(Ub != U)))
    name = _check_objective(objective)
    beta = _check_probability(failure_probability)
    inv_eps = cp.Parameter(nonneg=True, name="inv_epsilon", value=1.0 / eps)
    prob = ClippingProblem(cp.Minimize(_objective_expr(name, bias, sens, inv_eps, d, beta)), cons)
    return prob._attach({"counts": m, "bound": U, "user_bounds": Ub, "inv_epsilon": inv_eps, "dim": d,
                         "objective_name": name, "failure_probability": beta, "variants": variants,
                         "geometry": geometry if d >= 2 else "l1"})


def _add_variants(cons: list, a: Any, b: Any, ub: Any, *, cap: float | None,
                  fixed: tuple[np.ndarray, np.ndarray, np.ndarray], own_bounds: bool) -> tuple[str, ...]:
    """Append the ``bias_cap`` and ``fixed`` constraints on the variables ``a``, ``b`` and ``ub``
    (user bias shares) to ``cons``; returns the names of the variants in use."""
    fidx, flo, fhi = fixed
    if cap is not None:
        cons.append(ub <= cap)
    if fidx.size:
        cons += [a[fidx] == flo, b[fidx] == fhi]
    return tuple(v for v, on in (("user_bounds", own_bounds), ("bias_cap", cap is not None),
                                 ("fixed", bool(fidx.size))) if on)


def _base_model(m: np.ndarray, Ub: np.ndarray, d: int, geometry: str) -> tuple[Any, ...]:
    """Variables (lower, upper, user_bias, bias, sensitivity) and constraints of the base model."""
    L = m.size
    w = m.astype(float) / float(m.sum())  # m_ℓ/n
    a = cp.Variable(L, name="lower")
    b = cp.Variable(L, name="upper")
    ub = cp.Variable(L, name="user_bias")
    bias = cp.Variable(name="bias")
    sens = cp.Variable(name="sensitivity")
    cons: list[cp.Constraint] = [a >= 0, b >= a, b <= Ub, ub >= cp.multiply(w, a), ub >= cp.multiply(w, Ub - b)]
    k = d if geometry == "cube" else 1  # the cube: d coordinates, each the 1-D problem
    if d == 1 or geometry == "cube":
        cons += [bias >= k * (w @ (Ub - b)), bias >= k * (w @ a), sens >= k * cp.multiply(w, b - a)]
    else:
        cons += [bias >= cp.sum(ub), sens >= 2.0 * cp.multiply(w, b)]
    return a, b, ub, bias, sens, cons

def _check_objective(objective: Any) -> str:
    if objective not in OBJECTIVES:
        raise DpoptInputError(f"`objective` must be one of {', '.join(map(repr, OBJECTIVES))}; got {objective!r}")
    return str(objective)


def _check_probability(value: Any) -> float:
    try:
        beta = float(value)
    except (TypeError, ValueError):
        beta = math.nan
    if not 0.0 < beta < 1.0:
        raise DpoptInputError(f"`failure_probability` must be a number in (0, 1); got {_show(value)}")
    return beta


def _tail_factor(d: int, beta: float) -> float:
    """Q_d(1 − β): ``P[‖Z‖₁ ≥ Q·Δ/ε] = β`` for d Laplace(Δ/ε) coordinates."""
    from ..calculus import laplace_l1_tail

    return laplace_l1_tail(1.0, 1.0, beta, dim=d)


def _objective_expr(name: str, bias: Any, sens: Any, inv_eps: Any, d: int, beta: float) -> Any:
    """The built-in objective ``name`` of (bias, Δ) with ``inv_eps`` = 1/ε — cvxpy expressions (DPP:
    the parameter multiplies a parameter-free variable) or floats alike."""
    if name == "worst_case":
        return bias + d * (inv_eps * sens)
    if name == "high_probability":
        return bias + _tail_factor(d, beta) * (inv_eps * sens)
    if isinstance(bias, float):
        return bias ** 2 + 2.0 * d * (sens * inv_eps) ** 2
    return cp.square(bias) + 2.0 * d * cp.square(inv_eps * sens)


def _slope(name: str, bias: float, sens: float, eps: float, d: int, beta: float) -> float | None:
    """s = (∂f/∂Δ)/(∂f/∂bias) of a built-in objective at (bias, Δ); ``None`` where undefined."""
    if name == "worst_case":
        return d / eps
    if name == "high_probability":
        return _tail_factor(d, beta) / eps
    if name == "mse" and bias > 0 and sens > 0:
        return 4.0 * d * sens / (eps ** 2 * 2.0 * bias)
    return None


def interval_terms(counts: np.ndarray, user_bounds: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                   dim: int, geometry: str = "l1") -> tuple[float, float]:
    """Exact worst-case bias and ℓ1 sensitivity of per-user intervals with per-user ranges U_ℓ.

    d = 1 (seed 000 Lemma III.1, exact form, ERRATA E9): bias ``max{Σ m_ℓ(U_ℓ − b_ℓ),
    Σ m_ℓ a_ℓ}/n``, sensitivity ``max_ℓ m_ℓ(b_ℓ − a_ℓ)/n``; d ≥ 2 (seed 001 Lemma III.2, ERRATA E3):
    bias ``Σ m_ℓ max{a_ℓ, U_ℓ − b_ℓ}/n``, sensitivity ``max_ℓ 2 m_ℓ b_ℓ/n``; the cube (d ≥ 2): d times
    the d = 1 terms (the coordinates are clipped independently).
    """
    w = counts / float(counts.sum())
    if dim >= 2 and geometry == "cube":
        bias, sens = interval_terms(counts, user_bounds, lower, upper, 1)
        return dim * bias, dim * sens
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
    ``error = bias + noise`` (the worst-case error, whatever the objective). ``objective`` is the
    problem's objective re-evaluated at the returned intervals with those exact terms
    (``info["solver_objective"]`` is the solver's value, ``info["objective"]`` its name).
    ``certificate``: the first-order certificate of the module docstring where one exists, else None.
    ``info["result"]`` holds the :class:`~dpopt.solve.result.SolveResult`.
    """
    if not isinstance(problem, ClippingProblem):
        raise DpoptInputError(f"`problem` must be a ClippingProblem (from clipping_problem); got "
                              f"{type(problem).__name__}")
    if problem.objective_name == "mse":  # by LPs, not HiGHS's QP (dpopt.clipping.parametric)
        from .parametric import solve_mse

        res = solve_mse(problem, time_limit=solver_seconds(time_limit), options=options)
    else:
        res = solve_cvxpy(problem, time_limit=time_limit, options=options, scale=problem.bound)  # in units of U
    d, eps = problem.dim, problem.epsilon
    if res.x is None:
        return _no_solution(problem, res)
    lower = np.clip(np.asarray(problem.lower.value, float), 0.0, problem.user_bounds)
    upper = np.clip(np.asarray(problem.upper.value, float), lower, problem.user_bounds)
    # the release uses the returned intervals: never report less than their exact bias and
    # sensitivity (the solver meets its constraints only to its feasibility tolerance)
    exact_bias, exact_sens = interval_terms(problem.counts, problem.user_bounds, lower, upper, d, problem.geometry)
    bias = max(float(problem.bias.value), exact_bias)
    sens = max(float(problem.sensitivity.value), exact_sens)
    n = float(problem.counts.sum())
    width = problem.counts * (upper if d >= 2 and problem.geometry == "l1" else upper - lower)
    solver_value = float(res.objective)
    value = _exact_objective(problem, lower, upper, bias, sens)
    cert, eps_cert = _certificate(problem, bias, sens) if res.status is Status.OPTIMAL else (None, None)
    info = {"result": res, "n": n, "objective": problem.objective_name, "solver_objective": solver_value,
            "geometry": problem.geometry}
    if eps_cert is not None:
        info["certificate_epsilon"] = eps_cert
    return ClippingPlan(
        lower=lower, upper=upper, threshold=float(np.max(width)), error=bias + d * sens / eps, bias=bias,
        noise=d * sens / eps, sensitivity=sens, certificate=cert, bound=problem.bound, epsilon=eps, dim=d,
        method="lp", status=res.status, formulation="custom", backend="cvxpy", objective=value,
        solve_time=res.solve_time, info=info, gap=res.proven_gap,
    )


def _no_solution(problem: ClippingProblem, res: Any) -> ClippingPlan:
    nan = np.full(problem.counts.size, math.nan)
    return ClippingPlan(nan, nan, math.nan, math.nan, math.nan, math.nan, math.nan, None,
                        problem.bound, problem.epsilon, problem.dim, method="lp", status=res.status,
                        formulation="custom", backend="cvxpy", solve_time=res.solve_time, info={"result": res},
                        gap=math.inf)


def _exact_objective(problem: ClippingProblem, lower: np.ndarray, upper: np.ndarray, bias: float,
                     sens: float) -> float:
    """The problem's objective at the returned intervals with the exact bias and sensitivity."""
    if problem.objective_name != "custom":
        return float(_objective_expr(problem.objective_name, bias, sens, 1.0 / problem.epsilon, problem.dim,
                                     problem.failure_probability))
    w = problem.counts / float(problem.counts.sum())
    problem.lower.value, problem.upper.value = lower, upper
    problem.user_bias.value = w * np.maximum(lower, problem.user_bounds - upper)
    problem.bias.value, problem.sensitivity.value = bias, sens
    return float(problem.objective.value)


def _certificate(problem: ClippingProblem, bias: float, sens: float) -> tuple[Any, float | None]:
    """The closed form's KKT pair at ε' = d/s when it certifies the plan (module docstring)."""
    from .closed_form import optimal_clipping

    if problem.variants or problem.objective_name == "custom":
        return None, None
    s = _slope(problem.objective_name, bias, sens, problem.epsilon, problem.dim, problem.failure_probability)
    if s is None:
        return None, None
    eps_cert = problem.dim / s
    ref = optimal_clipping(problem.counts, problem.bound, eps_cert, dim=problem.dim, geometry=problem.geometry)
    linear = bias + s * sens
    if ref.certificate is None or abs(linear - ref.error) > CERTIFICATE_RTOL * abs(ref.error):  # relative: any U
        return None, None
    return ref.certificate, eps_cert


def export_problem(problem: cp.Problem, path: Any) -> Any:
    """Write a (custom) clipping problem to ``.mps`` or ``.lp`` with HiGHS ``writeModel``.

    The file holds the standard form cvxpy hands to HiGHS (:func:`dpopt.solve.cvxpy_backend.from_cvxpy`),
    in the model's own units; returns the path. :meth:`ClippingProblem.solve_plan` solves in units of
    U: a re-solve of the file where U is far from 1 meets HiGHS's absolute tolerances as written (at
    U = 5·10⁻⁸ a d = 3 model re-solved to 0 against its optimum 5·10⁻⁸; an outside fuzz run) — scale
    the bound to 1 before exporting, or solve with ``solve_plan``.

    Parameters
    ----------
    problem : cvxpy.Problem
        A linear problem, e.g. a :class:`ClippingProblem` from :func:`clipping_problem` with added
        constraints (the ``"mse"`` objective is quadratic and cannot be written).
    path : str or os.PathLike
        The file to write; its suffix, ``.mps`` or ``.lp``, chooses the format. Columns carry the cvxpy
        variables' names (``lower``, ``upper``, ...).

    Returns
    -------
    pathlib.Path
        ``path``, written.

    Raises
    ------
    DpoptInputError
        If ``path`` does not end in ``.mps`` or ``.lp`` (checked first), or the problem is not linear (a
        quadratic objective or conic constraints).
    OSError
        If HiGHS cannot write the file.
    """
    from ..solve import write_model
    from ..solve.highs import check_model_path

    path = check_model_path(path)  # before the conversion: a wrong name costs nothing
    return write_model(from_cvxpy(problem, name="clipping_custom"), path)
