"""Figures 1–5 of seed 003 (Rameshwar et al., arXiv 2401.15906): pseudo-user mechanisms on ITMS.

* Fig. 1: MAE vs ε on ITMS for Array-Averaging, Levy and Quantile (FixedQuantile), each under
  WrapAround and BestFit.
* Fig. 2: BestFit only: Baseline (``Δ_f/ε``, analytic as in the paper), Array-Averaging, Levy,
  FixedQuantile, ε-DependentQuantile.
* Fig. 3: sample scaling (κ = 10: every ``m_ℓ`` times κ), synthetic projected-Gaussian samples.
* Fig. 4: user scaling (κ = 10 copies of every user), synthetic samples.
* Fig. 5: the minimax array length ``m_UB(ε)`` (smallest minimiser of eq. (15)) vs ε.

Protocol (seed 003 §IV; models/mechanisms.md): U = 65, ε ∈ {0.5, …, 2}, 10^4 runs per point, per-user mean
substitution, users processed in non-increasing ``m_ℓ``, ``m`` from eq. (9) (114 on ITMS),
γ = 0.2, Levy interval ``3τ``, FixedQuantile α = 0.1, releases clipped to [0, U] as in the
authors' code. The ITMS data ship with dpopt (:func:`dpopt.datasets.load_itms`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_bound, check_choice, check_positive_int
from ..mechanisms import array_averaging, levy, quantile
from ..mechanisms.array_averaging import median_array_length
from ..mechanisms.laplace import laplace_sensitivity
from ..mechanisms.levy import levy_array_length
from .base import FigureResult, Rows, as_epsilon_grid, dataset_unit_mean, figure_inputs, progress_bar

__all__ = ["itms_dataset", "scaled_dataset", "fig1", "fig2", "fig3", "fig4", "fig5", "DEFAULT_EPSILONS"]

#: the authors' ε grid (config and result folders of ma1VAR3/DAPaMean-MD)
DEFAULT_EPSILONS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.4, 1.6, 2.0)
DEFAULT_RUNS = 10_000
U_DEFAULT = 65.0
_GROUP_LABEL = {"wrap_around": "WrapAround", "best_fit": "BestFit"}


def itms_dataset() -> tuple[np.ndarray, np.ndarray]:
    """ITMS samples in the user-contiguous layout and the counts (users in sorted plate order)."""
    from ..datasets import load_itms

    df = load_itms()
    users, inverse = np.unique(df["user"].to_numpy(), return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse, minlength=users.size).astype(np.int64)
    return df["value"].to_numpy(float)[order], counts


def scaled_dataset(
    counts: np.ndarray, mode: str, kappa: int, mean: float, sd: float, bound: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic dataset of seed 003 §IV-C: counts scaled by κ (``"sample"``) or users copied κ times
    (``"user"``); samples ``Π_[0,U](N(mean, sd²))`` i.i.d."""
    check_choice(mode, "mode", ("sample", "user"))
    new = counts * kappa if mode == "sample" else np.repeat(counts, kappa)
    x = np.clip(rng.normal(mean, sd, size=int(new.sum())), 0.0, bound)
    return x, new


def _length(rule: Any, counts: np.ndarray) -> int:
    if rule == "levy":
        return levy_array_length(counts)
    if rule == "median":
        return median_array_length(counts)
    return check_positive_int(rule, "aa_length")


def _params(runs: int, seed: int, U: float, eps: np.ndarray, **more: Any) -> dict[str, Any]:
    """The parameters a figure reports (``FigureResult.params``)."""
    return {"runs": runs, "seed": seed, "bound": U, "epsilons": list(map(float, eps)), **more}


def _series(name: str, grouping: str) -> str:
    return f"{name}-{_GROUP_LABEL[grouping]}"


def _run_mechanisms(
    figure: str,
    mechanisms: list[tuple[str, Any, dict]],
    datasets: list[tuple[np.ndarray, np.ndarray]],
    eps: np.ndarray,
    *,
    runs: int,
    bound: float,
    seed: int,
    progress: bool,
    rows: Rows,
) -> None:
    """MAE of each mechanism at each ε, ``runs`` split evenly over the datasets.

    With several datasets the standard error treats the datasets as the units
    (:func:`~dpopt.experiments.base.dataset_unit_mean`): the figure's quantity is an average over
    random datasets, and the runs on one dataset are not independent draws of it.
    """
    rng = np.random.default_rng(seed)
    per = [runs // len(datasets) + (1 if i < runs % len(datasets) else 0) for i in range(len(datasets))]
    with progress_bar(len(mechanisms) * len(eps), progress, figure) as bar:
        for name, mech, kw in mechanisms:
            for e in eps:
                errs = []
                for (x, m), r in zip(datasets, per):
                    if r == 0:
                        continue
                    rel = mech(x, m, bound, e, rng=rng, runs=r, **kw)
                    errs.append(np.abs(rel.values - x.mean()))
                value, se = dataset_unit_mean(errs)
                rows.add(name, e, value, se)
                bar.update(1)


#: user processing orders: the paper's (non-increasing m_l, the default) and the authors' code's
#: (alphabetical licence plates = the order of the shipped ITMS data, i.e. "given")
ORDERS = {"nonincreasing": "nonincreasing", "authors": "given", "given": "given"}


def _order(order: str) -> str:
    return ORDERS[check_choice(order, "order", tuple(ORDERS))]


def _common_kw(clip_output: bool, order: str) -> dict:
    return {"clip_output": clip_output, "order": _order(order)}


def _notes_common(runs: int, seed: int, eps: np.ndarray, U: float, *, aa_len: int, mlen: int, clip_output: bool,
                  order: str, gamma: float, width_factor: float, alpha: float, wrap_factor: float = 1.0) -> str:
    """The notes Figs. 1–4 of seed 003 share: the protocol (``runs``, ``seed``, the ε grid ``eps``,
    U) and the mechanisms' settings (array lengths ``aa_len`` and ``mlen``, output clipping, user
    ``order``, Levy's ``gamma`` and ``width_factor``, FixedQuantile's ``alpha``, the WrapAround
    sensitivity factor ``wrap_factor``)."""
    return (
        f"U = {U:g} km/h (paper: 65); eps grid {list(map(float, eps))} (default: the authors' code); runs per "
        f"point {runs}; seed {seed}.\n"
        f"Per-user mean substitution (seed 003 §IV-A); user processing order: {order} "
        "(default 'nonincreasing' m_l as the paper states; `order='authors'` is the authors' code's "
        "alphabetical licence-plate order, the order of the shipped ITMS data).\n"
        f"Levy/Quantile array length m = {mlen} from eq. (9); Array-Averaging length m = {aa_len} "
        "(parameter `aa_length`: 'levy' = eq. (9), 'median' = Lemma III.2; the paper does not say which "
        "one its Fig. 1/2 used; the repository numbers match eq. (9)).\n"
        f"Array-Averaging WrapAround sensitivity factor = {wrap_factor:g} x U/K (paper text: 2; the 2023 "
        "code behind the figure: 1; the exact sensitivity for full arrays is U/K, checked by brute force).\n"
        f"Levy: gamma = {gamma}, interval length {width_factor:g}*tau, phi = 2 under WrapAround, 1 under "
        "BestFit (score and noise).\n"
        f"FixedQuantile alpha = {alpha}; Smith's quantile with eps/4 per end, target gap alpha*(K+1).\n"
        f"Releases clipped to [0, U]: {clip_output} (authors' code clips; post-processing).\n"
        "Value = MAE over runs against the true sample mean; stderr = sd/sqrt(runs) for one dataset, "
        "sd(per-dataset MAE)/sqrt(datasets) when runs are spread over several random datasets.\n"
    )


def fig1(*, runs: int = DEFAULT_RUNS, seed: int = 0, progress: bool = False, epsilons: Any = None,
         bound: float = U_DEFAULT, aa_length: Any = "levy", wrap_factor: float = 1.0, clip_output: bool = True,
         order: str = "nonincreasing", gamma: float = 0.2, width_factor: float = 3.0,
         alpha: float = 0.1) -> FigureResult:
    """Seed 003 Fig. 1: WrapAround vs BestFit for Array-Averaging, Levy and Quantile on ITMS."""
    runs, U, eps = figure_inputs(runs, bound, epsilons, DEFAULT_EPSILONS)
    x, m = itms_dataset()
    aa_len = _length(aa_length, m)
    mlen = levy_array_length(m)
    kw = _common_kw(clip_output, order)
    mechs = []
    for grouping in ("wrap_around", "best_fit"):
        mechs.append((_series("AA", grouping), array_averaging,
                      dict(kw, length=aa_len, grouping=grouping, wrap_factor=wrap_factor)))
    for grouping in ("wrap_around", "best_fit"):
        mechs.append((_series("Levy", grouping), levy,
                      dict(kw, length=mlen, grouping=grouping, gamma=gamma, width_factor=width_factor)))
    for grouping in ("wrap_around", "best_fit"):
        mechs.append((_series("Quantile", grouping), quantile,
                      dict(kw, length=mlen, grouping=grouping, variant="fixed", alpha=alpha)))
    rows = Rows("003-fig1")
    _run_mechanisms("003-fig1", mechs, [(x, m)], eps, runs=runs, bound=U, seed=seed, progress=progress, rows=rows)
    notes = "ITMS HAT '18 8642d9d6fffffff' (217 users, 17,166 records).\n" + _notes_common(
        runs, seed, eps, U, aa_len=aa_len, mlen=mlen, clip_output=clip_output, order=order, gamma=gamma,
        width_factor=width_factor, alpha=alpha, wrap_factor=wrap_factor)
    return FigureResult("003-fig1", rows.frame(), notes, _params(runs, seed, U, eps))


def _bestfit_panel(
    figure: str, datasets: list[tuple[np.ndarray, np.ndarray]], *, runs: int, seed: int, progress: bool,
    eps: np.ndarray, U: float, aa_length: Any, clip_output: bool, order: str, gamma: float,
    width_factor: float, alpha: float, with_eps_dependent: bool, rank_rule: str,
) -> tuple[Rows, int, int]:
    m0 = datasets[0][1]
    aa_len = _length(aa_length, m0)
    mlen = levy_array_length(m0)
    kw = dict(_common_kw(clip_output, order), grouping="best_fit")
    mechs = [
        ("AA-BestFit", array_averaging, dict(kw, length=aa_len)),
        ("Levy-BestFit", levy, dict(kw, length=mlen, gamma=gamma, width_factor=width_factor)),
        ("Quantile-BestFit", quantile, dict(kw, length=mlen, variant="fixed", alpha=alpha)),
    ]
    if with_eps_dependent:
        mechs.append(("EpsDependentQuantile-BestFit", quantile,
                      dict(kw, length=mlen, variant="eps_dependent", rank_rule=rank_rule)))
    rows = Rows(figure)
    rows.add_many("Baseline", eps, laplace_sensitivity(m0, U) / eps, 0.0)
    _run_mechanisms(figure, mechs, datasets, eps, runs=runs, bound=U, seed=seed, progress=progress, rows=rows)
    return rows, aa_len, mlen


def fig2(*, runs: int = DEFAULT_RUNS, seed: int = 0, progress: bool = False, epsilons: Any = None,
         bound: float = U_DEFAULT, aa_length: Any = "levy", clip_output: bool = True, order: str = "nonincreasing",
         gamma: float = 0.2, width_factor: float = 3.0, alpha: float = 0.1, rank_rule: str = "ceil") -> FigureResult:
    """Seed 003 Fig. 2: BestFit mechanisms against Baseline on ITMS."""
    runs, U, eps = figure_inputs(runs, bound, epsilons, DEFAULT_EPSILONS)
    rows, aa_len, mlen = _bestfit_panel(
        "003-fig2", [itms_dataset()], runs=runs, seed=seed, progress=progress, eps=eps, U=U,
        aa_length=aa_length, clip_output=clip_output, order=order, gamma=gamma, width_factor=width_factor,
        alpha=alpha, with_eps_dependent=True, rank_rule=rank_rule)
    notes = (
        "ITMS HAT; Baseline = Delta_f/eps = U*m*/(n*eps) analytically (E|Lap(b)| = b), as in the paper.\n"
        f"eps-DependentQuantile: alpha = r/K with r = {rank_rule}(2/eps), data-independent (the authors' code "
        "took alpha from the raw data, which is not private).\n"
        + _notes_common(runs, seed, eps, U, aa_len=aa_len, mlen=mlen, clip_output=clip_output, order=order,
                        gamma=gamma, width_factor=width_factor, alpha=alpha)
    )
    return FigureResult("003-fig2", rows.frame(), notes, _params(runs, seed, U, eps))


def _scaling(figure: str, mode: str, *, runs: int, seed: int, progress: bool, epsilons: Any, bound: float,
             kappa: int, datasets: int, aa_length: Any, clip_output: bool, order: str, gamma: float,
             width_factor: float, alpha: float, with_eps_dependent: bool, rank_rule: str) -> FigureResult:
    runs, U, eps = figure_inputs(runs, bound, epsilons, DEFAULT_EPSILONS)
    kappa = check_positive_int(kappa, "kappa")
    n_data = check_positive_int(datasets, "datasets")
    x0, m0 = itms_dataset()
    mu, sd = float(x0.mean()), float(x0.std())
    rng = np.random.default_rng([seed, 1])
    data = [scaled_dataset(m0, mode, kappa, mu, sd, U, rng) for _ in range(min(n_data, runs))]
    rows, aa_len, mlen = _bestfit_panel(
        figure, data, runs=runs, seed=seed, progress=progress, eps=eps, U=U, aa_length=aa_length,
        clip_output=clip_output, order=order, gamma=gamma, width_factor=width_factor, alpha=alpha,
        with_eps_dependent=with_eps_dependent, rank_rule=rank_rule)
    notes = (
        f"{mode.capitalize()} scaling with kappa = {kappa} of the ITMS counts; samples clip(N(mu, sd^2), 0, U) "
        f"i.i.d. with the ITMS mean {mu:.4f} and population sd {sd:.4f}.\n"
        f"{len(data)} independent synthetic datasets, runs split evenly over them (the paper does not say "
        "how often the synthetic data were redrawn; parameter `datasets`). MAE against each dataset's own "
        "sample mean. The error band uses the datasets as the units (sd of the per-dataset MAEs / "
        "sqrt(datasets)), since the figure averages over random datasets.\n"
        "Baseline = U*m*/(n*eps) analytically.\n"
        + _notes_common(runs, seed, eps, U, aa_len=aa_len, mlen=mlen, clip_output=clip_output, order=order,
                        gamma=gamma, width_factor=width_factor, alpha=alpha)
    )
    return FigureResult(figure, rows.frame(), notes, _params(runs, seed, U, eps, kappa=kappa, datasets=len(data)))


def fig3(*, runs: int = DEFAULT_RUNS, seed: int = 0, progress: bool = False, epsilons: Any = None,
         bound: float = U_DEFAULT, kappa: int = 10, datasets: int = 10, aa_length: Any = "levy",
         clip_output: bool = True, order: str = "nonincreasing", gamma: float = 0.2,
         width_factor: float = 3.0, alpha: float = 0.1) -> FigureResult:
    """Seed 003 Fig. 3: sample scaling (κ·m_ℓ samples per user), BestFit mechanisms."""
    return _scaling("003-fig3", "sample", runs=runs, seed=seed, progress=progress, epsilons=epsilons,
                    bound=bound, kappa=kappa, datasets=datasets, aa_length=aa_length, clip_output=clip_output,
                    order=order, gamma=gamma, width_factor=width_factor, alpha=alpha,
                    with_eps_dependent=False, rank_rule="ceil")


def fig4(*, runs: int = DEFAULT_RUNS, seed: int = 0, progress: bool = False, epsilons: Any = None,
         bound: float = U_DEFAULT, kappa: int = 10, datasets: int = 10, aa_length: Any = "levy",
         clip_output: bool = True, order: str = "nonincreasing", gamma: float = 0.2,
         width_factor: float = 3.0, alpha: float = 0.1, rank_rule: str = "ceil") -> FigureResult:
    """Seed 003 Fig. 4: user scaling (κ copies of every user), BestFit mechanisms."""
    return _scaling("003-fig4", "user", runs=runs, seed=seed, progress=progress, epsilons=epsilons,
                    bound=bound, kappa=kappa, datasets=datasets, aa_length=aa_length, clip_output=clip_output,
                    order=order, gamma=gamma, width_factor=width_factor, alpha=alpha,
                    with_eps_dependent=True, rank_rule=rank_rule)


FIG5_EPSILONS = tuple(np.round(np.arange(0.001, 1.9995, 0.001), 3))


def fig5(*, runs: int | None = None, seed: int = 0, progress: bool = False, epsilons: Any = None,
         bound: float = U_DEFAULT) -> FigureResult:
    """Seed 003 Fig. 5: ``m_UB(ε)``, the smallest minimiser of eq. (15) on ITMS (no randomness)."""
    from ..arrays import exact_length_path

    U = check_bound(bound)
    eps = as_epsilon_grid(epsilons, FIG5_EPSILONS)
    _, m = itms_dataset()
    with progress_bar(1, progress, "003-fig5") as bar:
        path = exact_length_path(m, U, eps)
        bar.update(1)
    rows = Rows("003-fig5")
    rows.add_many("m_UB", eps, path.astype(float), 0.0)
    notes = (
        "m_UB(eps) = smallest minimiser over m of U(1 - Gamma_m/M) + U*m/(eps*Gamma_m) (eq. (15)), noise term "
        "E|Z| as in the text (the authors' notebook used the Laplace sd, a sqrt(2) factor that shifts the "
        "switch points by sqrt(2)). Deterministic: `--runs` and `--seed` are ignored.\n"
        f"eps grid: default 0.001..1.999 step 0.001 (the authors' notebook); here {eps.size} points. U = {U:g}."
    )
    return FigureResult("003-fig5", rows.frame(), notes, {"bound": U})
