"""The distribution of a marginal's node counts from their noisy measurements, and each node's count
read against it: empirical Bayes with the nonparametric maximum likelihood estimate (NPMLE) of the
counts' distribution (Kiefer & Wolfowitz 1956), computed by EM on a fixed grid of atoms (Laird 1978;
Jiang & Zhang 2009, whose grid posterior means attain the oracle Bayes risk up to logarithmic
factors; Koenker & Mizera 2014 solve the same convex program by interior point). Post-processing of
DP outputs: it reads the noisy counts and their public noise law only (models/engine.md §5, "The
plan's admission rule").

Model. The true counts c_1..c_N of one marginal's nodes are draws from an unknown distribution G on
[0, ∞); each is measured as ĉ_n = c_n + z_n, z_n from the release's noise law (Laplace or Gaussian,
:class:`dpopt.measurements.NoiseLaw`). The NPMLE maximises ℓ(G) = Σ_n log ∫ f(ĉ_n − c) dG(c) over
every distribution; on the atoms a_1..a_K it is the concave program

    max_w Σ_n log Σ_k f(ĉ_n − a_k) w_k   s.t. w ≥ 0, Σ_k w_k = 1,

whose EM update w_k ← w_k·D_k, D_k = (1/N) Σ_n f(ĉ_n − a_k) / Σ_j f(ĉ_n − a_j) w_j, raises ℓ at every
step to its maximum (Dempster, Laird & Rubin 1977). D_k is also the certificate: ℓ being concave in w
with Σ_k w_k D_k = 1, the maximum exceeds ℓ(w) by at most N·(max_k D_k − 1) (Lindsay 1983's
directional derivative), so EM stops when max_k D_k − 1 ≤ :data:`TOLERANCE`. A node's count is then
read by its posterior P(c = a_k | ĉ_n) = f(ĉ_n − a_k) w_k / Σ_j f(ĉ_n − a_j) w_j: its mean E[c | ĉ_n]
or its quantiles.

What it does with the data: where the nodes' counts are all alike, or all below the noise, Ĝ is
nearly one atom and every node reads about the mean count (the even spread); where a few nodes hold
most of the records and the noise shows it, Ĝ has atoms near 0 and near the busy counts, and the
busy nodes read high. Unlike the noisy counts themselves (clipped at 0, an empty node reads about
0.4 noise sds on average), it neither invents records in empty nodes nor spreads random factors.
Its weak side: an observation far out in the noise's tail (of 5,000 nodes of equal counts under
Laplace noise, the largest lies ≈ 5 sds out) may get an atom of its own, and its posterior stays
near it; a rule that counts nodes (the engine's admission rule asks for five) is not moved by one
(tests/hierarchy/test_count_prior.py).

Numerical choices (none about data): :data:`ATOMS` atoms evenly spaced over [0, max ĉ] (the NPMLE's
support lies within the observations' range, Lindsay 1983; a posterior mean moves by at most half a
spacing when the grid is coarser than the noise, where the counts are measured well anyway);
observations binned to 1/:data:`BINS_PER_SD` of the noise sd where the scale is one value (a
Laplace kernel moves by a factor of at most exp(√2/64) ≈ 1.02 within half a bin; on 215 nodes at
noise b = 750 the binned fit's posterior means were within 5 counts of the exact convex optimum's);
EM stopped when ℓ per observation
certificate falls to :data:`TOLERANCE` or after :data:`MAX_ITERATIONS` rounds (reported).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..measurements import NoiseLaw

__all__ = ["CountPrior", "fit_count_prior", "denoised_counts", "ATOMS", "TOLERANCE", "MAX_ITERATIONS"]

#: atoms of the grid on which the counts' distribution is estimated (a resolution, not a statement
#: about data: the posterior means need the distribution's shape, not its fine detail)
ATOMS = 200
#: EM stops when its certificate max_k D_k − 1 (module doc) is at most this: ℓ per observation
#: within this many nats of its maximum over the atoms (a solver tolerance, not a statement about data)
TOLERANCE = 1e-3
#: EM rounds at most (a work limit; the result says whether the tolerance was met)
MAX_ITERATIONS = 3000
#: bins per noise sd where the observations share one noise scale
BINS_PER_SD = 32
#: observations per block of the posterior means (memory: CHUNK × ATOMS floats a block)
CHUNK = 8192


@dataclass(frozen=True)
class CountPrior:
    """The NPMLE of a marginal's node counts' distribution on a grid of atoms (module doc).

    Attributes
    ----------
    atoms, weights : (K,) arrays
        The grid a_1..a_K (counts, ≥ 0) and the estimated masses w_k (≥ 0, summing to 1).
    loglik : float
        ℓ(Ĝ) = Σ_n log Σ_k f(ĉ_n − a_k) w_k of the observations as fitted (binned where they share
        one scale), up to the noise density's normalising constant (the same for every G).
    iterations : int
        EM rounds run.
    converged : bool
        Whether the certificate max_k D_k − 1 (module doc) reached :data:`TOLERANCE`.
    gap : float
        That certificate at the end: ℓ per observation is within ``gap`` nats of its maximum.
    family : str
        The noise law's family (:data:`dpopt.measurements.NOISE_FAMILIES`).
    scale : float or (N,) array
        The noise law's scale per observation (Laplace b or Gaussian σ).
    """

    atoms: np.ndarray
    weights: np.ndarray
    loglik: float
    iterations: int
    converged: bool
    gap: float
    family: str
    scale: np.ndarray

    def _posteriors(self, noisy: np.ndarray) -> Iterator[tuple[slice, np.ndarray]]:
        """Each noisy count's posterior masses on the atoms, CHUNK rows at a time (bounded memory on
        large marginals): yields (rows, masses)."""
        noisy = np.asarray(noisy, dtype=float).ravel()
        scale = np.broadcast_to(self.scale, noisy.shape)
        for lo in range(0, noisy.size, CHUNK):
            part = slice(lo, lo + CHUNK)
            post = _kernel(noisy[part], self.atoms, scale[part], self.family) * self.weights[None, :]
            yield part, post / np.maximum(post.sum(axis=1, keepdims=True), np.finfo(float).tiny)

    def posterior_means(self, noisy: np.ndarray) -> np.ndarray:
        """E[c | ĉ] for each noisy count ``noisy`` measured under this prior's noise law."""
        out = np.empty(np.size(noisy))
        for part, post in self._posteriors(noisy):
            out[part] = post @ self.atoms
        return out

    def posterior_quantiles(self, noisy: np.ndarray, q: float) -> np.ndarray:
        """The ``q``-quantile of c given ĉ for each noisy count ``noisy``: the least atom a_k with
        P(c ≤ a_k | ĉ) ≥ q (q in (0, 1))."""
        if not 0.0 < q < 1.0:
            raise ValueError(f"`q` must lie in (0, 1); got {q!r}")
        out = np.empty(np.size(noisy))
        for part, post in self._posteriors(noisy):
            out[part] = self.atoms[np.argmax(np.cumsum(post, axis=1) >= q - 1e-12, axis=1)]
        return out


def _log_kernel(noisy: np.ndarray, atoms: np.ndarray, scale: np.ndarray, family: str) -> np.ndarray:
    """log f(ĉ_n − a_k) up to a term constant in k (it cancels in EM and the posterior)."""
    d = noisy[:, None] - atoms[None, :]
    s = np.maximum(scale, np.finfo(float).tiny)[:, None]
    return -np.abs(d) / s if family.endswith("laplace") else -0.5 * (d / s) ** 2


def _kernel(noisy: np.ndarray, atoms: np.ndarray, scale: np.ndarray, family: str) -> np.ndarray:
    """f(ĉ_n − a_k) scaled by a positive factor per row (its largest entry is 1)."""
    log_k = _log_kernel(noisy, atoms, scale, family)
    return np.exp(log_k - log_k.max(axis=1, keepdims=True))


def fit_count_prior(noisy: np.ndarray, law: NoiseLaw) -> CountPrior:
    """The NPMLE of the distribution of the true counts behind ``noisy`` (one marginal's noisy node
    counts) measured under ``law`` (module doc). Post-processing of DP outputs."""
    noisy = np.asarray(noisy, dtype=float).ravel()
    if noisy.size == 0 or not np.all(np.isfinite(noisy)):
        raise ValueError("`noisy` must be a non-empty array of finite counts")
    scale = np.broadcast_to(np.asarray(law.scale, dtype=float), noisy.shape)
    top = max(float(noisy.max()), 0.0)
    atoms = np.linspace(0.0, top, ATOMS) if top > 0 else np.zeros(1)
    values, mult, row_scale = noisy, np.ones(noisy.size), scale
    if np.all(scale == scale[0]) and scale[0] > 0:  # one scale: bin to 1/BINS_PER_SD of the noise sd
        sd = float(scale[0]) * (np.sqrt(2.0) if law.family.endswith("laplace") else 1.0)
        width = sd / BINS_PER_SD
        values, mult = np.unique(np.round(noisy / width) * width, return_counts=True)
        row_scale = np.full(values.size, scale[0])
    log_k = _log_kernel(values, atoms, row_scale, law.family)
    row_max = log_k.max(axis=1)
    kernel = np.exp(log_k - row_max[:, None])
    share = mult / mult.sum()
    w = np.full(atoms.size, 1.0 / atoms.size)
    mix = kernel @ w
    it = 0
    while True:
        d = (share / mix) @ kernel  # D_k: the EM multiplier and the optimality certificate
        gap = float(d.max() - 1.0)
        if gap <= TOLERANCE or it == MAX_ITERATIONS:
            break
        w = w * d
        w = w / w.sum()
        mix = kernel @ w
        it += 1
    return CountPrior(atoms=atoms, weights=w, loglik=float(mult @ (np.log(mix) + row_max)), iterations=it,
                      converged=gap <= TOLERANCE, gap=gap, family=law.family, scale=np.asarray(law.scale, dtype=float))


def denoised_counts(noisy: np.ndarray, law: NoiseLaw) -> np.ndarray:
    """Each node's posterior mean count E[c | ĉ_n] under the NPMLE of the counts' distribution
    (:func:`fit_count_prior`). Post-processing of DP outputs."""
    return fit_count_prior(noisy, law).posterior_means(noisy)
