"""The measurement-strategy optimiser: which marginals to measure, with which contribution bounds,
and which share of the total budget each (models/strategy.md).

Every grid g answers θ_g = μ + Σ_f u_f[code_f(g)] (factors f: e.g. place, time, residual; u_f,j
independent with prior variance σ²_f). Measuring candidate c (a marginal with one bound option)
with budget power b_c gives node n a noisy mean with noise variance v_n / b_c, where b_c = s_c·ρ
(zCDP, Gaussian noise, s_c the share of ρ) or b_c = (s_c·ε)² (pure ε, Laplace). The separable
surrogate of the crossed model's posterior variance (models/strategy.md §2) is

    V_f,j = 1 / (1/σ²_f + Σ_c Σ_{n ⊂ j} b_c / (r_c,f,n·b_c + v_n)),
    MSE(g) = Σ_f V_f,code_f(g) + Σ_{c measured} bias2_c(g),

and :func:`solve_strategy` minimises Σ_g w_g MSE(g) subject to Σ_c s_c ≤ 1, at most one option per
marginal (binaries), a share floor and must/must-not flags. The model is an LP/MILP solved with
HiGHS (:mod:`dpopt.solve`) by Kelley's cutting planes (outer approximation): one epigraph variable
per factor, cut by the tangent planes of its convex part of the objective (the tangents of the
concave precisions' hypographs composed with those of 1/x by the chain rule), added until the
master's bound is within ``gap_tol`` of the true objective (a certificate for ``"gaussian"``, where
the problem is convex). For ``"laplace"`` the budget power (s_c ε)² is not concave in s_c; the
convex-concave procedure linearises s² from below (every iterate feasible), and a relaxation
(b_c ≤ s_c ε²) gives a valid lower bound, so the reported gap is honest (status ``heuristic``
unless it closes).
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .._validation import DpoptInputError, check_choice
from ..solve.model import ModelBuilder
from ..solve.result import SolveResult, Status

__all__ = ["Candidate", "StrategyProblem", "StrategyPlan", "solve_strategy", "greedy_strategy",
           "predicted_mse", "GAP_TOL", "NOISES"]

#: relative gap (upper − lower) / upper between the true objective of the best point found and the
#: LP/MILP bound at which the cutting planes stop; a ratio of two predicted MSEs, so it has no unit
#: and does not depend on the data (it only needs to sit above HiGHS's 1e-7 feasibility tolerance)
GAP_TOL = 1e-6
#: cutting-plane rounds before the solve reports ``iteration_limit`` (a work limit, not a model constant)
MAX_ROUNDS = 300
#: convex-concave rounds per start for pure ε (each round solves a convex problem to ``gap_tol``)
MAX_CCP_ROUNDS = 50
#: inner tolerance of the pure-ε steps while they still gain more than it (the relaxation that gives
#: the bound and the start; early convex-concave rounds): a relative gap, unitless like ``GAP_TOL``
COARSE_TOL = 1e-3
#: a share at or below this is "not measured" when no binary says so (HiGHS's primal tolerance scale)
ZERO_SHARE = 1e-9
NOISES = ("gaussian", "laplace")
MUSTS = ("measure", "not")


def _bad(name: str, rule: str, value: Any) -> DpoptInputError:
    text = " ".join(repr(value).split())
    return DpoptInputError(f"`{name}` {rule}; got {text[:77] + '...' if len(text) > 80 else text}")


def _codes(value: Any, name: str, size: int | None = None) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.dtype.kind not in "iu" or (size is not None and arr.size != size):
        need = f" of length {size}" if size is not None else ""
        raise _bad(name, f"must be a 1-D integer array{need}", value)
    if arr.size and arr.min() < 0:
        raise _bad(name, "must hold integers >= 0", value)
    return arr.astype(np.int64)


def _reals(value: Any, name: str, size: int, *, positive: bool = False) -> np.ndarray:
    rule = "> 0" if positive else ">= 0"
    try:
        arr = np.asarray(value, dtype=float) if np.ndim(value) else np.full(size, float(value))
    except (TypeError, ValueError):
        arr = np.full(1, np.nan)
    if arr.shape != (size,) or not np.all(np.isfinite(arr)) or np.any(arr <= 0 if positive else arr < 0):
        raise _bad(name, f"must be a finite number {rule} or an array of them of length {size}", value)
    return arr


@dataclass(frozen=True, eq=False)
class Candidate:
    """One candidate measurement: a marginal of the public lattice with one bound option.

    Attributes
    ----------
    marginal, option : str
        The marginal's name (e.g. ``"cell x period"``) and the bound option's label (``"k=2,c=4"``);
        at most one option of a marginal is measured.
    node : (G,) int array
        The marginal's node holding each listed grid (0..N−1).
    v : (N,) float array
        Noise variance of node n's mean at unit budget power (ρ = 1, or ε = 1 for Laplace): the
        engine's prediction from the pilot; the noise variance is ``v / b`` at budget power b.
    informs : mapping factor → r
        The factors whose levels this marginal's nodes inform, each with r (a number or one per node):
        the variance of the other components that do not average out in a node's mean. Every node must
        lie inside one level of each factor it informs.
    bias2 : float or (G,) array
        Predicted squared bias of each grid's answer when this option is measured.
    must : {"measure", "not"} or None
        Force the candidate in (with at least the share floor) or out.
    """

    marginal: str
    option: str
    node: np.ndarray
    v: np.ndarray
    informs: Mapping[str, Any] = field(default_factory=dict)
    bias2: Any = 0.0
    must: str | None = None

    @property
    def label(self) -> str:
        return f"{self.marginal}/{self.option}"


@dataclass(frozen=True, eq=False)
class StrategyProblem:
    """What :func:`solve_strategy` optimises (inputs validated on construction, one-line errors).

    Attributes
    ----------
    factors : mapping name → (G,) int array
        Each factor's level code per listed grid (e.g. ``{"cell": …, "slot": …, "residual": arange(G)}``).
    sigma2 : mapping name → float
        Prior variance σ²_f ≥ 0 of each factor's effects (the REML estimate from the pilot).
    candidates : sequence of Candidate
    budget : float
        Total ρ (``noise="gaussian"``, zCDP) or total ε (``noise="laplace"``).
    noise : {"gaussian", "laplace"}
    min_share : float
        Share floor of every measured candidate (0 ≤ floor ≤ 1).
    grid_weights : (G,) array or None
        Weight of each grid's MSE in the objective (default 1 each).
    committed : (C,) array or None
        Share of the total budget each candidate already holds (an earlier round's measurement that a
        later one refines): its share is at least this, and a candidate holding some is measured
        (default none). The shares still sum to at most 1.
    """

    factors: Mapping[str, Any]
    sigma2: Mapping[str, float]
    candidates: Sequence[Candidate]
    budget: float
    noise: str = "gaussian"
    min_share: float = 0.0
    grid_weights: Any = None
    committed: Any = None

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def num_grids(self) -> int:
        return int(next(iter(self.factors.values())).size)


def _validate(pb: StrategyProblem) -> None:
    check_choice(pb.noise, "noise", NOISES)
    if not isinstance(pb.factors, Mapping) or not pb.factors:
        raise _bad("factors", "must be a non-empty mapping of factor name to level codes", pb.factors)
    first = next(iter(pb.factors.values()))
    size = np.asarray(first).size
    if size == 0:
        raise _bad("factors", "must hold at least one grid", pb.factors)
    factors = {str(f): _codes(c, f"factors[{f!r}]", size) for f, c in pb.factors.items()}
    if not isinstance(pb.sigma2, Mapping) or set(map(str, pb.sigma2)) != set(factors):
        raise _bad("sigma2", f"must map each factor {sorted(factors)} to a variance", pb.sigma2)
    sigma2 = {f: float(_reals(pb.sigma2[f], f"sigma2[{f!r}]", 1)[0]) for f in factors}
    budget = pb.budget
    if isinstance(budget, bool) or not isinstance(budget, numbers.Real) or not 0 < budget < math.inf:
        raise _bad("budget", "must be a positive finite number", budget)
    floor = pb.min_share
    if isinstance(floor, bool) or not isinstance(floor, numbers.Real) or not 0 <= floor <= 1:
        raise _bad("min_share", "must be a number in [0, 1]", floor)
    weights = np.ones(size) if pb.grid_weights is None else _reals(pb.grid_weights, "grid_weights", size)
    if not isinstance(pb.candidates, Sequence) or not pb.candidates:
        raise _bad("candidates", "must be a non-empty sequence of Candidate", pb.candidates)
    cands = tuple(_check_candidate(c, i, size, factors) for i, c in enumerate(pb.candidates))
    committed = np.zeros(len(cands)) if pb.committed is None else _reals(pb.committed, "committed", len(cands))
    if np.any(committed > 1) or committed.sum() > 1 + 1e-9:
        raise _bad("committed", "must hold shares in [0, 1] summing to at most 1", pb.committed)
    if any(c.must == "not" and k > 0 for c, k in zip(cands, committed)):
        raise _bad("committed", "must be 0 for a candidate marked must='not'", pb.committed)
    labels = [c.label for c in cands]
    if len(set(labels)) != len(labels):
        raise _bad("candidates", "must not repeat a (marginal, option) pair", labels)
    for i, c in enumerate(cands):
        for f in c.informs:
            _node_levels(c, i, f, factors[f])  # every node inside one level of each factor it informs
    for key, val in (("factors", factors), ("sigma2", sigma2), ("budget", float(budget)),
                     ("min_share", float(floor)), ("grid_weights", weights), ("candidates", cands),
                     ("committed", committed)):
        object.__setattr__(pb, key, val)


def _check_candidate(c: Any, i: int, size: int, factors: Mapping[str, np.ndarray]) -> Candidate:
    name = f"candidates[{i}]"
    if not isinstance(c, Candidate):
        raise _bad(name, "must be a Candidate", c)
    node = _codes(c.node, f"{name}.node", size)
    v = np.asarray(c.v, dtype=float)
    if v.ndim != 1 or v.size <= node.max() or not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise _bad(f"{name}.v", f"must be a 1-D array of finite numbers > 0, one per node "
                   f"(at least {node.max() + 1})", c.v)
    if not isinstance(c.informs, Mapping) or not set(c.informs) <= set(factors):
        raise _bad(f"{name}.informs", f"must map some of the factors {sorted(factors)} to r", c.informs)
    informs = {f: _reals(r, f"{name}.informs[{f!r}]", v.size) for f, r in c.informs.items()}
    bias2 = _reals(c.bias2, f"{name}.bias2", size)
    if c.must is not None:
        check_choice(c.must, f"{name}.must", MUSTS)
    return replace(c, marginal=str(c.marginal), option=str(c.option), node=node, v=v,
                   informs=informs, bias2=bias2)


@dataclass(frozen=True, eq=False)
class _Compiled:
    """The problem as flat arrays: levels L = (factor, level) pairs with σ² > 0, hypographs
    h = (candidate, level) pairs, and the (candidate, node, informed factor) terms feeding them."""

    scale: float            # budget power at share 1: ρ, or ε² (b_c = scale·p_c)
    marg: np.ndarray        # (C,) marginal index of each candidate
    lev_w: np.ndarray       # (L,) W_L σ²_L / norm (objective weight of 1/x̃_L)
    lev_s2: np.ndarray      # (L,) σ²_L
    hyp_c: np.ndarray       # (H,) candidate of each hypograph
    hyp_l: np.ndarray       # (H,) level of each hypograph
    term_h: np.ndarray      # (M,) hypograph of each node term
    term_r: np.ndarray
    term_v: np.ndarray
    bias: np.ndarray        # (C,) Σ_g w_g bias2_c(g) / norm
    bias2: np.ndarray       # (C, G)
    grid_lev: np.ndarray    # (F', G) level of each grid per factor with σ² > 0
    lev_group: np.ndarray   # (L,) factor (0..F'−1) of each level: one epigraph variable per factor
    norm: float
    use_z: bool
    laplace: bool

    @property
    def num_cand(self) -> int:
        return int(self.marg.size)

    def precision(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Scaled hypograph values σ²_L·Q_h(p_c) and their derivatives in p_c."""
        b = self.scale * p[self.hyp_c[self.term_h]]
        den = self.term_r * b + self.term_v
        n = self.hyp_c.size
        s2 = self.lev_s2[self.hyp_l]
        q = np.bincount(self.term_h, b / den, minlength=n) * s2
        dq = np.bincount(self.term_h, self.scale * self.term_v / den ** 2, minlength=n) * s2
        return q, dq

    @property
    def num_groups(self) -> int:
        return int(self.grid_lev.shape[0])

    def groups_at(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ψ_k(p) = Σ_{L of factor k} w_L/x̃_L(p) and its gradient in p, shape (F',) and (F', C)."""
        t, dt = self.precision(p)
        x = self.x_of(t)
        value = np.bincount(self.lev_group, self.lev_w / x, minlength=self.num_groups)
        slope = -(self.lev_w / x ** 2)[self.hyp_l] * dt  # chain rule: d(w/x)/dp_c = −w/x² · dt/dp_c
        n = self.num_cand
        grad = np.bincount(self.lev_group[self.hyp_l] * n + self.hyp_c, slope, minlength=self.num_groups * n)
        return value, grad.reshape(self.num_groups, n)

    def x_of(self, t: np.ndarray) -> np.ndarray:
        """x̃_L = 1 + Σ_{h ∈ L} t_h (the level's posterior precision times σ²_L)."""
        return 1.0 + np.bincount(self.hyp_l, t, minlength=self.lev_w.size)

    def objective(self, z: np.ndarray, p: np.ndarray) -> float:
        """The true (normalised) surrogate objective at binaries z and budget powers p."""
        return float(self.lev_w @ (1.0 / self.x_of(self.precision(p)[0])) + self.bias @ z)


def _levels(pb: StrategyProblem) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """Global level id of each grid per factor with σ² > 0, and each level's W, σ² and factor."""
    grid_lev, w, s2, grp, start = {}, [], [], [], 0
    for f, codes in pb.factors.items():
        if pb.sigma2[f] <= 0:
            continue
        uniq, inv = np.unique(codes, return_inverse=True)
        grid_lev[f] = start + inv
        w.append(np.bincount(inv, pb.grid_weights, minlength=uniq.size))
        s2.append(np.full(uniq.size, pb.sigma2[f]))
        grp.append(np.full(uniq.size, len(grp)))
        start += uniq.size
    cat = lambda a: np.concatenate(a) if a else np.zeros(0)  # noqa: E731
    return grid_lev, cat(w), cat(s2), cat(grp).astype(np.int64)


def _node_levels(c: Candidate, i: int, f: str, glev: np.ndarray) -> np.ndarray:
    """Level of f holding each node of c (−1: node holds no listed grid); error if a node spans two."""
    n = c.v.size
    lo = np.full(n, np.iinfo(np.int64).max)
    hi = np.full(n, -1)
    np.minimum.at(lo, c.node, glev)
    np.maximum.at(hi, c.node, glev)
    span = (hi >= 0) & (lo != hi)
    if span.any():
        raise DpoptInputError(f"`candidates[{i}].informs` names factor {f!r}, but node "
                              f"{int(np.flatnonzero(span)[0])} of {c.label!r} spans two of its levels")
    return hi


def _compile(pb: StrategyProblem) -> _Compiled:
    grid_lev, lev_w, lev_s2, lev_group = _levels(pb)
    hyp_c, hyp_l, term_h, term_r, term_v, nh = [], [], [], [], [], 0
    for i, c in enumerate(pb.candidates):
        for f, r in c.informs.items():
            if f not in grid_lev:
                continue
            lev = _node_levels(c, i, f, grid_lev[f])
            keep = lev >= 0
            uniq, inv = np.unique(lev[keep], return_inverse=True)
            hyp_c.append(np.full(uniq.size, i))
            hyp_l.append(uniq)
            term_h.append(nh + inv)
            term_r.append(r[keep])
            term_v.append(c.v[keep])
            nh += uniq.size
    cat = lambda a, dt=float: np.concatenate(a).astype(dt) if a else np.zeros(0, dt)  # noqa: E731
    laplace = pb.noise == "laplace"
    scale = pb.budget ** 2 if laplace else pb.budget
    hyp_l, term_h, term_r = cat(hyp_l, np.int64), cat(term_h, np.int64), cat(term_r)
    term_v = np.maximum(cat(term_v), scale * NOISE_FLOOR * (term_r + lev_s2[hyp_l[term_h]]))  # NOISE_FLOOR
    bias2 = np.stack([c.bias2 for c in pb.candidates])
    bias = bias2 @ pb.grid_weights
    norm = float(lev_w @ lev_s2 + bias.max()) or 1.0
    marg_names = list(dict.fromkeys(c.marginal for c in pb.candidates))
    marg = np.array([marg_names.index(c.marginal) for c in pb.candidates])
    grid = np.array(list(grid_lev.values()), dtype=np.int64).reshape(len(grid_lev), pb.num_grids)
    use_z = bool(laplace or pb.min_share > 0 or bias.any() or np.bincount(marg).max() > 1
                 or any(c.must == "measure" for c in pb.candidates))
    return _Compiled(scale=scale, marg=marg, lev_w=lev_w * lev_s2 / norm,
                     lev_s2=lev_s2, hyp_c=cat(hyp_c, np.int64), hyp_l=hyp_l,
                     term_h=term_h, term_r=term_r, term_v=term_v, bias=bias / norm,
                     bias2=bias2, grid_lev=grid,
                     lev_group=lev_group, norm=norm, use_z=use_z, laplace=laplace)


def _grid_mse(comp: _Compiled, pb: StrategyProblem, shares: np.ndarray,
              measured: np.ndarray | None) -> np.ndarray:
    p = shares ** 2 if comp.laplace else shares
    z = (shares > ZERO_SHARE) if measured is None else np.asarray(measured, bool)
    v = comp.lev_s2 / comp.x_of(comp.precision(p)[0])
    return v[comp.grid_lev].sum(axis=0) + z.astype(float) @ comp.bias2


def predicted_mse(problem: StrategyProblem, shares: Any) -> np.ndarray:
    """Predicted MSE of every listed grid when candidate c gets ``shares[c]`` of the budget.

    A candidate with a positive share is measured (its bias2 counts). ``shares`` must be ≥ 0 with
    sum ≤ 1 (models/strategy.md §2; checked against a dense GLS posterior in the tests).
    """
    s = _reals(shares, "shares", len(problem.candidates))
    if s.sum() > 1 + 1e-9:
        raise _bad("shares", "must sum to at most 1", shares)
    return _grid_mse(_compile(problem), problem, s, None)


@dataclass(eq=False)
class _Cuts:
    """Tangent planes collected so far, Y_k ≥ a + g·p for the epigraph variable Y_k of factor k's
    part Ψ_k(p) = Σ_{L of k} w_L / x̃_L(p) of the objective (convex: models/strategy.md §3). All stay
    valid for every iterate (under-estimators of fixed convex functions)."""

    group: list[np.ndarray] = field(default_factory=list)
    const: list[np.ndarray] = field(default_factory=list)
    grad: list[np.ndarray] = field(default_factory=list)

    def add(self, comp: _Compiled, p: np.ndarray, groups: np.ndarray | None = None) -> None:
        value, grad = comp.groups_at(p)
        k = np.arange(value.size) if groups is None else groups
        self.group.append(k)
        self.grad.append(grad[k])
        self.const.append(value[k] - grad[k] @ p)

    def seed(self, comp: _Compiled, n_marg: int) -> None:
        """Tangents at no budget, at an equal split over the marginals and at each candidate alone."""
        n = comp.num_cand
        for p in (np.zeros(n), np.full(n, 1.0 / n_marg), *np.eye(n)):
            self.add(comp, p)

    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.group:
            return np.zeros(0, np.int64), np.zeros((0, 0)), np.zeros(0)
        return np.concatenate(self.group), np.concatenate(self.grad), np.concatenate(self.const)


@dataclass(frozen=True)
class _Fix:
    """Column bounds from the problem: share floor, must-measure and must-not flags."""

    floor: float
    z_lower: np.ndarray
    z_upper: np.ndarray
    integer: bool = True  # False when z is fixed by its bounds: the master is an LP
    s_lower: np.ndarray | float = 0.0  # the shares already committed (an earlier round's)


def _fix_of(pb: StrategyProblem) -> _Fix:
    must = np.array([c.must or "" for c in pb.candidates])
    held = np.asarray(pb.committed, dtype=float) > 0
    return _Fix(floor=pb.min_share, z_lower=((must == "measure") | held).astype(float),
                z_upper=(must != "not").astype(float), s_lower=np.asarray(pb.committed, dtype=float))


def _build(comp: _Compiled, cuts: _Cuts, fix: _Fix, tangent: np.ndarray | None, slack: float = 0.0) -> Any:
    """The master LP/MILP (models/strategy.md §3); ``tangent`` s0 for the pure-ε linearisation."""
    n, ng = comp.num_cand, comp.num_groups
    b = ModelBuilder("strategy")
    p = b.add_cols("p", n, lower=0.0 if comp.laplace else fix.s_lower, upper=fix.z_upper)
    s = b.add_cols("s", n, lower=fix.s_lower, upper=fix.z_upper) if comp.laplace else p
    z = (b.add_cols("z", n, lower=fix.z_lower, upper=fix.z_upper, cost=comp.bias, integer=fix.integer)
         if comp.use_z else None)
    y = b.add_cols("y", ng, upper=comp.groups_at(np.zeros(n))[0] * (1.0 + slack), cost=1.0)
    b.add_rows("budget", rows=np.zeros(n), cols=s, vals=1.0, lower=-np.inf, upper=1.0, count=1)
    k, one = np.arange(n), np.ones(n)
    if z is not None:
        b.add_rows("on", rows=np.r_[k, k], cols=np.r_[s, z], vals=np.r_[one, -one], lower=-np.inf, upper=0.0)
        b.add_rows("floor", rows=np.r_[k, k], cols=np.r_[s, z], vals=np.r_[one, -fix.floor * one],
                   lower=0.0, upper=np.inf)
        b.add_rows("option", rows=comp.marg, cols=z, vals=1.0, lower=-np.inf, upper=1.0)
    if comp.laplace:  # p ≤ s (relaxation, valid as s² ≤ s) or p ≤ 2 s0 s − s0² z (tangent of s²)
        if tangent is None:
            rows, cols, vals = np.r_[k, k], np.r_[p, s], np.r_[one, -one]
        else:
            rows, cols, vals = np.r_[k, k, k], np.r_[p, s, z], np.r_[one, -2 * tangent, tangent ** 2]
        b.add_rows("square", rows=rows, cols=cols, vals=vals, lower=-np.inf, upper=0.0)
    group, grad, const = cuts.rows()
    r = np.arange(group.size)
    y0 = int(y[0]) if ng else 0  # no factor with σ² > 0: no epigraph (and no tangent) at all
    b.add_rows("tangent", rows=np.r_[r, np.repeat(r, n)], cols=np.r_[y0 + group, np.tile(p, r.size)],
               vals=np.r_[np.ones(r.size), -grad.ravel()], lower=const, upper=np.inf, count=r.size)
    return b.build()


#: the epigraph variables' upper bound is Ψ(0) (their largest value: Ψ falls with every share); a
#: master found infeasible is solved once more with the bound raised by this fraction, since a tangent
#: evaluated at zero shares can overshoot Ψ(0) by rounding where node noise spans eight decades
#: (aircraft A at ε = 1: the exact bound made a solvable master infeasible). A floating-point
#: allowance, not a property of the data. Only then: the bound's exact value steers the cutting planes'
#: path (raised everywhere, or dropped, the embedded day's plan at ε = 10 ended worse: 3.29 against 3.05)
EPIGRAPH_SLACK = 1e-6
#: a node's noise variance at unit budget power is taken as at least ``budget power × NOISE_FLOOR ×
#: (r + σ²)`` of the term it feeds: its precision then reaches its saturation at a share of 10⁻⁶ at
#: the latest, and the objective's slope at zero shares (its steepest: Ψ is convex and falls with
#: every share) is at most ≈ 1/NOISE_FLOOR per unit share. Without it a node's precision grows as
#: (budget power)/v: at ε = 10⁹ slopes of 10¹⁷, which HiGHS refused ("could not load model"), and at
#: 10⁸–10⁹ a master that claimed "optimal" at 2.6× the best grid point (a test instance at ε = 10⁵).
#: The objective moves by at most a share of 10⁻⁶ of any node's budget: a numerical resolution, not
#: a property of the data (at ε ≤ 10 it moved the plans of the payments, amounts and sensors only,
#: their medians by ≤ 2 %; models/strategy.md §5)
NOISE_FLOOR = 1e-6
#: a tangent is added where the LP point violates the true function by more than this fraction of
#: its value (far below ``GAP_TOL``; above it, HiGHS's feasibility tolerance would re-add the same cut)
CUT_TOL = 1e-9
#: the master MILP's own relative gap, as a fraction of the cutting-plane tolerance (below it)
_MIP_GAP_FRACTION = 0.1
#: HiGHS tolerances two orders below its defaults (1e-7), so that the master's bound is good to far
#: better than ``GAP_TOL``; presolve off (the master has C shares, C binaries and one epigraph
#: variable per factor: presolve finds nothing and costs a third of each solve)
_LP_OPTIONS = {"primal_feasibility_tolerance": 1e-9, "dual_feasibility_tolerance": 1e-9,
               "mip_feasibility_tolerance": 1e-9, "presolve": "off"}


@dataclass(frozen=True, eq=False)
class _Run:
    """The best point of one cutting-plane run (normalised objective) and its proven bound."""

    status: Status
    value: float
    bound: float
    z: np.ndarray | None
    p: np.ndarray | None
    s: np.ndarray | None
    rounds: int


def _read(comp: _Compiled, res: SolveResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p = np.clip(res.value("p"), 0.0, 1.0)
    s = np.clip(res.value("s"), 0.0, 1.0) if comp.laplace else p
    z = np.round(res.value("z")) if comp.use_z else (p > ZERO_SHARE).astype(float)
    return z, p, s


def _add_cuts(comp: _Compiled, cuts: _Cuts, res: SolveResult, p: np.ndarray, centre: np.ndarray) -> bool:
    """Tangents of the factors whose Y undercuts Ψ at the master's point p, there and at the midpoint
    of p and the best point so far ``centre`` (in-out stabilisation of Kelley's method, which
    otherwise zig-zags); False if nothing is violated."""
    y = res.value("y")
    value = comp.groups_at(p)[0]
    bad = np.flatnonzero(y < value - CUT_TOL * (value + 1e-300))
    if not bad.size:
        return False
    cuts.add(comp, p, bad)
    cuts.add(comp, 0.5 * (p + centre), bad)
    return True


def _master(comp: _Compiled, cuts: _Cuts, fix: _Fix, tangent: np.ndarray | None,
            left: float, gap_tol: float) -> SolveResult:
    from ..solve import solve

    model = _build(comp, cuts, fix, tangent)
    opts = dict(_LP_OPTIONS)
    if model.is_mip:
        opts.update(mip_rel_gap=gap_tol * _MIP_GAP_FRACTION, mip_abs_gap=0.0)
    limit = None if math.isinf(left) else left
    res = solve(model, time_limit=limit, options=opts)
    if res.status is Status.INFEASIBLE:  # a tangent's rounding above the bound Ψ(0) (EPIGRAPH_SLACK)
        res = solve(_build(comp, cuts, fix, tangent, EPIGRAPH_SLACK), time_limit=limit, options=opts)
    return res


def _cutting_plane(comp: _Compiled, cuts: _Cuts, fix: _Fix, *, tangent: np.ndarray | None,
                   deadline: float, gap_tol: float) -> _Run:
    """Kelley's method on the convex model (Gaussian; or pure ε at a fixed tangent / relaxed)."""
    best: tuple[float, np.ndarray, np.ndarray, np.ndarray] | None = None
    bound, status, rounds = -math.inf, Status.ITERATION_LIMIT, 0
    for rounds in range(1, MAX_ROUNDS + 1):
        left = deadline - time.perf_counter()
        if left <= 0:
            status = Status.TIME_LIMIT
            break
        res = _master(comp, cuts, fix, tangent, left, gap_tol)
        if res.has_solution:
            z, p, s = _read(comp, res)
            val = comp.objective(z, p)
            if best is None or val < best[0]:
                best = (val, z, p, s)
        if math.isfinite(res.bound):
            bound = max(bound, res.bound)
        if not res.status.is_optimal or best is None:
            status = res.status
            break
        if best[0] - bound <= gap_tol * best[0]:
            status = Status.OPTIMAL
            break
        if not _add_cuts(comp, cuts, res, p, best[2]):
            status = Status.UNKNOWN  # no violated tangent yet a gap: numerical limits of the LP
            break
    if best is None:
        return _Run(status, math.nan, bound, None, None, None, rounds)
    return _Run(status, best[0], bound, best[1], best[2], best[3], rounds)


def _ccp(comp: _Compiled, cuts: _Cuts, fix: _Fix, s0: np.ndarray, *, deadline: float,
         gap_tol: float) -> _Run:
    """Convex-concave procedure for pure ε: b_c = (s_c ε)², s² replaced by its tangent at s0 (a lower
    bound, so every iterate is feasible); stop when the true objective stops improving. Inexact: the
    convex problems are solved to ``COARSE_TOL`` while the procedure still gains more, then to
    ``gap_tol`` (every iterate stays feasible whatever the inner accuracy). The option choice z is
    free (MILP) until two successive rounds choose the same z, then fixed (LP masters) until the
    shares settle, then free again; the procedure stops when a free round gains nothing."""
    run: _Run | None = None
    rounds, tol, now, last_z = 0, max(gap_tol, COARSE_TOL), fix, None
    for _ in range(MAX_CCP_ROUNDS):
        r = _cutting_plane(comp, cuts, now, tangent=s0, deadline=deadline, gap_tol=tol)
        rounds += r.rounds
        if r.s is None:
            break
        val = comp.objective(r.z, r.s ** 2)
        gain = math.inf if run is None else (run.value - val) / val
        if run is None or val < run.value:
            run = _Run(r.status, val, math.nan, r.z, r.s ** 2, r.s, rounds)
        settled = gain <= gap_tol and tol <= gap_tol
        if not r.status.is_optimal or (settled and now is fix):
            break
        stable = last_z is not None and np.array_equal(r.z, last_z)  # two free rounds chose alike
        now = fix if settled or not stable else replace(fix, z_lower=r.z, z_upper=r.z, integer=False)
        last_z = r.z if now is fix else None
        tol = gap_tol if gain <= gap_tol else max(gap_tol, min(tol, 0.1 * gain))
        s0 = np.where(r.s > ZERO_SHARE, r.s, s0)
    if run is None:
        return _Run(Status.INFEASIBLE if r.status.is_optimal else r.status, math.nan, math.nan,
                    None, None, None, rounds)
    return replace(run, rounds=rounds)


def _solve_laplace(comp: _Compiled, fix: _Fix, n_marg: int, *, deadline: float, gap_tol: float) -> _Run:
    """Relaxation b_c ≤ s_c ε² for the bound, then the CCP from its point and from an equal split;
    the relaxation is solved to ``COARSE_TOL`` and refined to ``gap_tol`` only when the plan comes
    that close to it (then the bound may certify the plan optimal)."""
    cuts = _Cuts()
    cuts.seed(comp, n_marg)
    coarse = max(gap_tol, COARSE_TOL)
    relax = _cutting_plane(comp, cuts, fix, tangent=None, deadline=deadline, gap_tol=coarse)
    if relax.s is None:
        return relax
    even = np.full(comp.num_cand, 1.0 / n_marg)
    held = np.broadcast_to(np.asarray(fix.s_lower, dtype=float), even.shape)
    starts = [np.where(relax.s > ZERO_SHARE, relax.s, even), even]
    if held.any():  # on top of the committed shares: what is left split evenly, or all on one candidate
        even = held + (1.0 - held.sum()) / n_marg
        starts = [starts[0], even] + [held + (1.0 - held.sum()) * np.eye(comp.num_cand)[j] for j in range(comp.num_cand)]
    best: _Run | None = None
    rounds = relax.rounds
    for s0 in starts:
        run = _ccp(comp, cuts, fix, s0, deadline=deadline, gap_tol=gap_tol)
        rounds += run.rounds
        if run.s is not None and (best is None or run.value < best.value):
            best = run
    if best is None:
        return replace(relax, status=Status.UNKNOWN, z=None, p=None, s=None, value=math.nan)
    gap = lambda bound: (best.value - bound) / best.value if best.value > 0 else 0.0  # noqa: E731
    bound = relax.bound
    if gap_tol < gap(bound) <= 2 * coarse:
        fine = _cutting_plane(comp, cuts, fix, tangent=None, deadline=deadline, gap_tol=gap_tol)
        bound, rounds = max(bound, fine.bound), rounds + fine.rounds
    status = (Status.OPTIMAL if gap(bound) <= gap_tol else
              best.status if best.status.is_limit else Status.HEURISTIC)
    return replace(best, status=status, bound=bound, rounds=rounds)


@dataclass(frozen=True, eq=False)
class StrategyPlan:
    """What to measure: a budget share per candidate, and the predicted error (models/strategy.md).

    Attributes
    ----------
    labels : tuple of (marginal, option)
        One per candidate, in the problem's order.
    shares : (C,) array
        Share of the total budget (of ρ for ``"gaussian"``, of ε for ``"laplace"``); 0 if not measured.
    measured : (C,) bool array
        Whether each candidate is measured (at most one option per marginal).
    chosen : mapping marginal → option label or None
    mse : float
        Predicted total MSE Σ_g w_g MSE(g) of the plan (the true surrogate, not the LP's value).
    grid_mse : (G,) array
        Predicted MSE of every listed grid.
    bound : float
        Proven lower bound on the optimum (the LP/MILP bound; for ``"laplace"`` the relaxation's).
    status : Status
        ``optimal`` when (mse − bound)/mse ≤ gap_tol; ``heuristic`` for a pure-ε plan whose gap to the
        relaxation stays open (or for :func:`greedy_strategy`); a limit or ``infeasible`` otherwise.
    gap : float
        (mse − bound) / mse (``inf`` without a bound).
    """

    labels: tuple[tuple[str, str], ...]
    shares: np.ndarray
    measured: np.ndarray
    chosen: Mapping[str, str | None]
    mse: float
    grid_mse: np.ndarray
    bound: float
    status: Status
    gap: float
    solve_time: float
    rounds: int
    noise: str
    budget: float

    @property
    def budgets(self) -> np.ndarray:
        """Each candidate's ρ_c (``"gaussian"``) or ε_c (``"laplace"``): share × total budget."""
        return self.shares * self.budget

    def __repr__(self) -> str:
        return f"StrategyPlan({self.summary()})"

    def summary(self) -> str:
        """One line: status, predicted MSE, bound and gap, the measured candidates and their shares."""
        what = ", ".join(f"{m}/{o} {s:.3g}" for (m, o), s, k in zip(self.labels, self.shares, self.measured)
                         if k) or "nothing"
        unit = "rho" if self.noise == "gaussian" else "eps"
        return (f"{self.status.value}: predicted MSE {self.mse:.6g} (bound {self.bound:.6g}, gap {self.gap:.2g}); "
                f"{unit}={self.budget:g} to {what}; {self.rounds} rounds, {self.solve_time:.3g} s")

    def to_frame(self) -> Any:
        """One row per candidate: marginal, option, measured, share, budget (ρ_c or ε_c)."""
        import pandas as pd

        unit = "rho" if self.noise == "gaussian" else "epsilon"
        return pd.DataFrame({"marginal": [m for m, _ in self.labels], "option": [o for _, o in self.labels],
                             "measured": self.measured, "share": self.shares, unit: self.budgets})


def _plan(pb: StrategyProblem, comp: _Compiled, run: _Run, t0: float) -> StrategyPlan:
    labels = tuple((c.marginal, c.option) for c in pb.candidates)
    bound = run.bound * comp.norm if math.isfinite(run.bound) else -math.inf
    if run.s is None:
        nan = np.full(len(labels), math.nan)
        return StrategyPlan(labels, nan, np.zeros(len(labels), bool), {}, math.nan,
                            np.full(pb.num_grids, math.nan), bound, run.status, math.inf,
                            time.perf_counter() - t0, run.rounds, pb.noise, pb.budget)
    forced = np.array([c.must == "measure" for c in pb.candidates])
    measured = (run.z > 0.5) & ((run.s > ZERO_SHARE) | forced)  # a free z = 1 at share 0 is no measurement
    shares = np.where(measured, run.s, 0.0)
    grid = _grid_mse(comp, pb, shares, measured)
    mse = float(pb.grid_weights @ grid)
    gap = max(0.0, (mse - bound) / mse) if mse > 0 else (0.0 if bound >= 0 else math.inf)
    chosen: dict[str, str | None] = {c.marginal: None for c in pb.candidates}
    for c, k in zip(pb.candidates, measured):
        if k:
            chosen[c.marginal] = c.option
    return StrategyPlan(labels, shares, measured, chosen, mse, grid, bound, run.status, gap,
                        time.perf_counter() - t0, run.rounds, pb.noise, pb.budget)


def solve_strategy(problem: StrategyProblem, *, time_limit: float | None = None,
                   gap_tol: float = GAP_TOL) -> StrategyPlan:
    """Choose the marginals, their bound options and budget shares of least predicted MSE.

    Parameters
    ----------
    problem : StrategyProblem
    time_limit : float, optional
        Total wall-clock seconds of this call; when it runs out the best plan found is returned with
        status ``time_limit`` and its gap to the proven bound.
    gap_tol : float
        Relative gap (upper − lower)/upper at which the cutting planes stop (default :data:`GAP_TOL`).

    Returns
    -------
    StrategyPlan
        Shares per candidate, the option chosen per marginal, predicted total and per-grid MSE, status,
        gap and timings. ``"gaussian"`` is solved to ``gap_tol`` (convex: models/strategy.md §3);
        ``"laplace"`` by the convex-concave procedure with the relaxation's bound (§4).
    """
    t0 = time.perf_counter()
    if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, numbers.Real)
                                   or not time_limit >= 0):
        raise _bad("time_limit", "must be a number >= 0 or None", time_limit)
    if isinstance(gap_tol, bool) or not isinstance(gap_tol, numbers.Real) or not 0 < gap_tol < 1:
        raise _bad("gap_tol", "must be a number in (0, 1)", gap_tol)
    comp = _compile(problem)
    deadline = t0 + (math.inf if time_limit is None else float(time_limit))
    n_marg = int(comp.marg.max()) + 1
    fix = _fix_of(problem)
    if comp.laplace:
        run = _solve_laplace(comp, fix, n_marg, deadline=deadline, gap_tol=gap_tol)
    else:
        cuts = _Cuts()
        cuts.seed(comp, n_marg)
        run = _cutting_plane(comp, cuts, fix, tangent=None, deadline=deadline, gap_tol=gap_tol)
    return _plan(problem, comp, run, t0)


def _restricted(problem: StrategyProblem, chosen: Sequence[int], time_limit: float | None) -> StrategyPlan:
    keep = set(chosen)
    cands = [replace(c, must="measure" if i in keep else "not") for i, c in enumerate(problem.candidates)]
    return solve_strategy(replace(problem, candidates=cands), time_limit=time_limit)


def greedy_strategy(problem: StrategyProblem, *, time_limit: float | None = None) -> StrategyPlan:
    """Greedy cross-check: from the must-measure candidates, repeatedly add the candidate (of a marginal
    not yet measured) whose addition, with the shares re-split optimally, lowers the predicted MSE most;
    stop when none does. Status ``heuristic``; :func:`solve_strategy` must match or beat it.
    ``time_limit`` applies to each re-split."""
    t0 = time.perf_counter()
    cands = problem.candidates
    chosen = [i for i, c in enumerate(cands) if c.must == "measure"]
    current = _restricted(problem, chosen, time_limit)
    while current.status.is_optimal or current.status is Status.HEURISTIC:
        used = {cands[i].marginal for i in chosen}
        trials = [(i, _restricted(problem, chosen + [i], time_limit)) for i, c in enumerate(cands)
                  if c.must != "not" and c.marginal not in used]
        trials = [(i, plan) for i, plan in trials if plan.status.is_optimal or plan.status is Status.HEURISTIC]
        if not trials:
            break
        i, plan = min(trials, key=lambda item: item[1].mse)
        if plan.mse >= current.mse:
            break
        chosen.append(i)
        current = plan
    status = Status.HEURISTIC if current.status.is_optimal else current.status
    return replace(current, status=status, solve_time=time.perf_counter() - t0)
