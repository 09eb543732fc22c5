"""The lower triangle of a symmetric n × n matrix held by column panels: half the memory of the dense
matrix, and the same numbers (models/crossed.md §3, "Memory").

The crossed model's restricted likelihood is evaluated many times on one design, and each evaluation
sums V = diag(s2) + Σ_k σ²_k G_k from the blocks' Gram matrices G_k = H_k H_kᵀ (n × n, one per
variance component). Dense, six of them at n = 3,503 node means are 590 MB, most of the release's
peak memory at 2·10⁷ records; Cholesky, LAPACK's inverse and the traces tr(V⁻¹G_k) read one triangle
only. Panel J holds columns e_J … e_{J+1} − 1 of the matrix from row e_J down (its diagonal block
whole, both of its triangles), column-major: n(n + w)/2 numbers for panels of width w.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.linalg.blas import daxpy

from .._memory import trim_heap

__all__ = ["TrianglePanels", "PANEL_WIDTH"]

#: columns per panel: a panel's share of the diagonal blocks' upper triangles costs w/n of the
#: storage, and each panel is one step of the loops below (n/w of them). Decides memory and work only
PANEL_WIDTH = 512


@dataclass(frozen=True)
class TrianglePanels:
    """The panel layout of an n × n symmetric matrix (see the module). ``edges`` are the panels'
    first columns and n; ``offsets`` where each panel starts in the packed vector (``size`` numbers)."""

    n: int
    edges: np.ndarray
    offsets: np.ndarray

    @classmethod
    def of_size(cls, n: int, width: int = PANEL_WIDTH) -> "TrianglePanels":
        n, width = int(n), max(int(width), 1)
        edges = np.append(np.arange(0, n, width), n).astype(np.int64) if n > 0 else np.zeros(1, np.int64)
        sizes = (n - edges[:-1]) * np.diff(edges)
        return cls(n=n, edges=edges, offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))

    @property
    def size(self) -> int:
        return int(self.offsets[-1])

    def _panels(self) -> Iterator[tuple[int, int, int, int]]:
        for J, (a, b) in enumerate(zip(self.edges[:-1], self.edges[1:])):
            yield int(a), int(b), int(self.offsets[J]), int(self.offsets[J + 1])

    def panel(self, packed: np.ndarray, J: int) -> np.ndarray:
        """Panel J of ``packed``: a column-major (n − e_J) × (e_{J+1} − e_J) view."""
        a, b = int(self.edges[J]), int(self.edges[J + 1])
        return packed[self.offsets[J]:self.offsets[J + 1]].reshape((self.n - a, b - a), order="F")

    def _gram_panels(self, H: sp.spmatrix) -> Iterator[tuple[int, int, int, int, np.ndarray]]:
        """Each panel of H Hᵀ as (a, b, lo, hi, the dense (n − a) × (b − a) block, column-major): a
        sparse product of H's rows (each entry the same sum, in the same order, as in the whole
        product H Hᵀ of a design with sorted indices; no n × n array)."""
        H = sp.csr_matrix(H, dtype=float)
        H = H if H.has_sorted_indices else H.sorted_indices()  # a copy: the caller's matrix is not touched
        for a, b, lo, hi in self._panels():
            yield a, b, lo, hi, (H[a:] @ H[a:b].T).toarray(order="F")

    def gram(self, H: sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
        """(the panels of H Hᵀ, its diagonal)."""
        out, diag = np.empty(self.size), np.empty(self.n)
        for a, b, lo, hi, block in self._gram_panels(H):
            out[lo:hi] = block.reshape(-1, order="F")
            diag[a:b] = np.diagonal(block[:b - a])
        self._release()
        return out, diag

    def gram_inner(self, low: np.ndarray, H: sp.spmatrix) -> tuple[float, np.ndarray]:
        """(Σ_{i ≥ j} low_ij·(H Hᵀ)_ij, the diagonal of H Hᵀ): :meth:`lower_inner` of :meth:`gram`'s
        panels without the packed vector — each panel's product read against ``low``'s panel as it is
        made, in the same order, so the same arithmetic (tested equal to the last bit) beside one
        panel instead of n(n + 1)/2 numbers (123 MiB at 5,544 node means)."""
        total, diag = 0.0, np.empty(self.n)
        for a, b, lo, hi, block in self._gram_panels(H):
            total += float(np.dot(_low_panel(low, a, b), block.reshape(-1, order="F")))
            diag[a:b] = np.diagonal(block[:b - a])
        self._release()
        return total, diag

    def lower_gram(self, H: sp.spmatrix) -> np.ndarray:
        """H Hᵀ as :meth:`lower` gives it (n × n, column-major, the panels only), without the packed
        vector: one panel's product at a time beside the dense result."""
        out = np.zeros((self.n, self.n), order="F")
        for a, b, lo, hi, block in self._gram_panels(H):
            out[a:, a:b] = block
        self._release()
        return out

    def _release(self) -> None:
        """The panels' products (each below the allocator's mmap threshold at n in the thousands)
        leave freed heap pages resident: returned where there was more than one panel (memory only;
        at 3,503 node means ≈ 200 MB, dpopt/_memory.py)."""
        if self.edges.size > 2:
            trim_heap()

    def combine(self, weights: list[float], packed: list[np.ndarray], work: np.ndarray | None = None) -> np.ndarray:
        """Σ_k weights[k]·packed[k] (packed), summed in place by BLAS axpy in the order of k (each
        entry the same arithmetic as the dense sum); in ``work`` where given (``size`` numbers)."""
        out = np.empty(self.size) if work is None else work
        out.fill(0.0)
        for w, p in zip(weights, packed):
            if w != 0.0:
                daxpy(p, out, a=float(w))
        return out

    def lower(self, packed: np.ndarray) -> np.ndarray:
        """The dense n × n matrix, column-major, its lower triangle (and the diagonal blocks' upper
        parts) from ``packed``; the rest 0. What Cholesky (lower) reads."""
        out = np.zeros((self.n, self.n), order="F")
        for J, (a, b, lo, hi) in enumerate(self._panels()):
            out[a:, a:b] = self.panel(packed, J)
        return out

    def symmetric(self, packed: np.ndarray) -> np.ndarray:
        """The whole symmetric n × n matrix, column-major."""
        return self.mirror(self.lower(packed))

    def mirror(self, lower: np.ndarray) -> np.ndarray:
        """``lower`` (as :meth:`lower` or :meth:`lower_gram` give it) made whole in place: each panel's
        rows below its diagonal block copied into the upper triangle."""
        for a, b, lo, hi in self._panels():
            lower[a:b, b:] = lower[b:, a:b].T
        return lower

    def lower_inner(self, low: np.ndarray, packed: list[np.ndarray]) -> np.ndarray:
        """Σ_{i ≥ j} low_ij·G_ij for each G_k in ``packed``: ``low`` is an n × n array whose strict
        upper triangle is 0 (LAPACK potri's lower result), each panel of it read once."""
        out = np.zeros(len(packed))
        for J, (a, b, lo, hi) in enumerate(self._panels()):
            part = _low_panel(low, a, b)
            for k, p in enumerate(packed):
                out[k] += float(np.dot(part, p[lo:hi]))
        return out


def _low_panel(low: np.ndarray, a: int, b: int) -> np.ndarray:
    """Columns a … b − 1 of ``low`` from row a down, column-major and flat: one copy of the panel
    that :meth:`TrianglePanels.lower_inner` and :meth:`TrianglePanels.gram_inner` read."""
    return np.asarray(low[a:, a:b]).reshape(-1, order="F")
