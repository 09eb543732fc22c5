"""The public occupancy array of seed 002: how many samples each user contributes to each grid.

:class:`Occupancy` stores the L × G count matrix ``A`` (``A[ℓ, g] = m_{g,ℓ}``) as a sparse CSR
matrix together with the user and grid labels (any hashable values). Everything the models need is
derived from it with vectorised sparse operations: per-user occupancy ``G_ℓ``, users per grid,
``N_g = Σ_ℓ m_{g,ℓ}``, ``m*_g = max_ℓ m_{g,ℓ}``, the bipartite user–grid graph and its connected
components (independent sub-problems for the suppression model).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._validation import DpoptInputError, _integer_valued, _show, label_parts, normalise_labels

__all__ = ["Occupancy", "UsersByGrids"]


class UsersByGrids:
    """The shape of an L × G array over users (rows ℓ) and grids (columns g).

    Shared by :class:`Occupancy` (the counts m_{g,ℓ}) and :class:`dpopt.plan.GridPlan` (the
    retained Γ_{ℓ,g}); a subclass names the attribute holding its array in ``_users_by_grids``
    (default ``"matrix"``, Occupancy's).
    """

    _users_by_grids = "matrix"

    @property
    def n_users(self) -> int:
        """L, the number of users (rows)."""
        return int(getattr(self, self._users_by_grids).shape[0])

    @property
    def n_grids(self) -> int:
        """G, the number of grids (columns)."""
        return int(getattr(self, self._users_by_grids).shape[1])


def _raw(values: Any, name: str) -> np.ndarray:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise DpoptInputError(f"`{name}` must be array-like (a list, numpy array or pandas Series); got {_show(values)}")
    if hasattr(values, "to_numpy"):
        values = values.to_numpy()
    if isinstance(values, (list, tuple)) and values and isinstance(values[0], tuple):
        arr = np.empty(len(values), dtype=object)  # tuple labels, e.g. (cell, slot)
        arr[:] = list(values)
        return arr
    if isinstance(values, (list, tuple)) and any(isinstance(v, (bool, np.bool_)) for v in values):
        raise DpoptInputError(f"`{name}` must not hold booleans (True would equal 1); got {_show(values)}")
    try:
        arr = np.asarray(values)
    except ValueError:
        raise DpoptInputError(f"`{name}` must be a flat array-like; got {_show(values)}") from None
    if isinstance(values, (list, tuple)) and arr.dtype.kind in "US":
        arr = np.empty(len(values), dtype=object)  # keep None/NaN as such (numpy would write "nan")
        arr[:] = list(values)
    if arr.ndim != 1:
        raise DpoptInputError(f"`{name}` must be one-dimensional; got shape {arr.shape}")
    return arr


def _labels(values: Any, name: str) -> np.ndarray:
    """Labels under dpopt's one normalisation rule (:func:`dpopt._validation.label_parts`): whole
    numbers (1, 1.0, "1.0") are the integer, text is stripped, missing labels (None, NaN, "") are
    refused; integer arrays pass unchanged."""
    arr = _raw(values, name)
    if arr.dtype.kind in "iu":
        return arr
    if arr.dtype.kind == "f":
        if np.any(np.isnan(arr)):
            i = int(np.flatnonzero(np.isnan(arr))[0])
            raise DpoptInputError(f"`{name}` must not hold missing labels (None, NaN, empty text); got nan at index {i}")
        if np.all(np.isfinite(arr) & (arr == np.round(arr)) & (np.abs(arr) < 2.0**53)):
            return arr.astype(np.int64)
    return normalise_labels(arr, name)


def _coded_labels(values: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique normalised labels and the code of each value (:func:`_labels` + :func:`_factorize`).

    Text labels (normalising 10^6 string labels one by one took 8 s) are factorised by pandas' hash table first
    and only the distinct labels are normalised, then merged where normalisation makes them equal
    (" 7" and "7.0" are the user 7): the same labels and codes as normalising every value.
    """
    arr = _raw(values, name)
    try:
        return _coded(arr, name)
    except TypeError:  # an unhashable value (a dict, a list) among the labels
        bad = next((v for v in arr.ravel().tolist() if getattr(type(v), "__hash__", None) is None), None)
        if bad is None:
            raise
        raise DpoptInputError(f"`{name}` must hold labels (numbers or text); got {type(bad).__name__} "
                              f"{_show(bad)}") from None


def _coded(arr: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_coded_labels` of the raw array ``arr``."""
    if arr.dtype.kind not in "OUS" or arr.size <= 64:
        return _factorize(_labels(arr, name))
    try:
        import pandas as pd
    except ImportError:  # the light install (no `release` extra): the same labels, more slowly
        return _factorize(_labels(arr, name))
    if pd.api.types.infer_dtype(arr, skipna=True) != "string":
        return _factorize(_labels(arr, name))
    codes, uniq = pd.factorize(arr, use_na_sentinel=False)
    try:
        labels, missing = label_parts(np.asarray(uniq, dtype=object))
    except DpoptInputError as exc:
        raise DpoptInputError(f"`{name}`: {exc}") from None
    if np.any(missing):
        i = int(np.flatnonzero(missing[codes])[0])
        raise DpoptInputError(
            f"`{name}` must not hold missing labels (None, NaN, empty text); got {_show(arr[i])} at index {i}")
    out, ucode = _factorize(labels)
    return out, ucode[codes]


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique labels and the code of each value (labels of mixed types: first-seen order)."""
    try:
        uniq, codes = np.unique(values, return_inverse=True)
        return uniq, codes.astype(np.int64)
    except TypeError:
        first: dict[Any, int] = {}  # first-seen order, as pandas.factorize(sort=False)
        codes = np.fromiter((first.setdefault(v, len(first)) for v in values.tolist()), dtype=np.int64,
                            count=len(values))
        uniq = np.empty(len(first), dtype=object)
        uniq[:] = list(first)
        return uniq, codes


def _compact(labels: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop the labels no code refers to (order kept) and renumber the codes."""
    used = np.zeros(labels.size, dtype=bool)
    used[codes] = True
    if used.all():
        return labels, codes
    new = np.cumsum(used) - 1
    return labels[used], new[codes]


@dataclass(frozen=True, eq=False)
class Occupancy(UsersByGrids):
    """Sparse user × grid occupancy array with labels.

    Build it with :meth:`from_triples`, :meth:`from_dense` or :meth:`from_frame`. Users and grids
    without any sample are dropped. Attributes are read-only.

    Attributes
    ----------
    matrix : scipy.sparse.csr_array of int64, shape (L, G)
        ``matrix[ℓ, g] = m_{g,ℓ} ≥ 1`` for every stored entry.
    users : ndarray, shape (L,)
        User labels (row order).
    grids : ndarray, shape (G,)
        Grid labels (column order).
    """

    matrix: sp.csr_array
    users: np.ndarray
    grids: np.ndarray

    # ---------------------------------------------------------------- constructors
    @classmethod
    def from_triples(cls, users: Any, grids: Any, counts: Any) -> "Occupancy":
        """From parallel arrays of (user, grid, count); duplicate pairs are summed.

        Counts must be non-negative integers; zero entries are ignored.
        """
        ulab, ui = _coded_labels(users, "users")
        glab, gi = _coded_labels(grids, "grids")
        c = _raw(counts, "counts")
        if not (ui.shape == gi.shape == c.shape):
            raise DpoptInputError(
                f"`users`, `grids` and `counts` must have one length; got {ui.size}, {gi.size}, {c.size}"
            )
        if c.size == 0:
            raise DpoptInputError("`counts` must not be empty; got 0 triples")
        if c.dtype.kind not in "iuf" or c.dtype.kind == "b":
            raise DpoptInputError(f"`counts` must hold integers; got dtype {c.dtype}")
        c = _integer_valued(c, "counts", counts)  # finite, whole, at most 2^40 (no int64 wrap)
        if np.any(c < 0):
            raise DpoptInputError(f"`counts` must hold integers >= 0; got {c[c < 0][0]}")
        keep = c > 0
        if not np.any(keep):
            raise DpoptInputError("`counts` must hold at least one positive count")
        ui, gi, c = ui[keep], gi[keep], c[keep]
        ulab, ui = _compact(ulab, ui)  # labels seen only with count 0 are dropped
        glab, gi = _compact(glab, gi)
        mat = sp.csr_array((c, (ui, gi)), shape=(ulab.size, glab.size), dtype=np.int64)
        mat.sum_duplicates()
        mat.sort_indices()
        return cls(mat, ulab, glab)

    @classmethod
    def from_dense(cls, matrix: Any, users: Any = None, grids: Any = None) -> "Occupancy":
        """From a dense L × G array of counts (zeros = absent); labels default to 0..L−1, 0..G−1."""
        try:
            arr = np.asarray(matrix)
        except ValueError:  # a ragged list of rows
            raise DpoptInputError("`matrix` must be a non-empty 2-D array (rows of one length); got "
                                  f"{_show(matrix)}") from None
        if arr.ndim != 2 or arr.size == 0:
            raise DpoptInputError(f"`matrix` must be a non-empty 2-D array; got shape {arr.shape}")
        L, G = arr.shape
        ulab = np.arange(L) if users is None else _labels(users, "users")
        glab = np.arange(G) if grids is None else _labels(grids, "grids")
        if ulab.size != L or glab.size != G:
            raise DpoptInputError(
                f"`users`/`grids` must have lengths {L}/{G}; got {ulab.size}/{glab.size}"
            )
        r, col = np.nonzero(arr)
        if r.size == 0:
            raise DpoptInputError("`matrix` must hold at least one positive count")
        return cls.from_triples(ulab[r], glab[col], arr[r, col])

    @classmethod
    def from_frame(
        cls, frame: Any, *, user: str = "user", grid: str = "grid", count: str = "count"
    ) -> "Occupancy":
        """From a pandas DataFrame with columns ``user``, ``grid``, ``count`` (names mappable)."""
        missing = [c for c in (user, grid, count) if c not in frame.columns]
        if missing:
            raise DpoptInputError(
                f"`frame` must have columns {user!r}, {grid!r}, {count!r}; missing {missing}"
            )
        return cls.from_triples(frame[user], frame[grid], frame[count])

    # ---------------------------------------------------------------- derived quantities
    @property
    def n_pairs(self) -> int:
        return int(self.matrix.nnz)

    @cached_property
    def csc(self) -> sp.csc_array:
        """The same matrix in CSC form (grid-wise access)."""
        return self.matrix.tocsc()

    @cached_property
    def user_occupancy(self) -> np.ndarray:
        """G_ℓ: number of grids each user occupies."""
        return np.diff(self.matrix.indptr).astype(np.int64)

    @cached_property
    def users_per_grid(self) -> np.ndarray:
        """|L_g|: number of users in each grid."""
        return np.diff(self.csc.indptr).astype(np.int64)

    @cached_property
    def grid_totals(self) -> np.ndarray:
        """N_g = Σ_ℓ m_{g,ℓ}."""
        return np.asarray(self.matrix.sum(axis=0)).ravel().astype(np.int64)

    @cached_property
    def grid_max(self) -> np.ndarray:
        """m*_g = max_ℓ m_{g,ℓ}."""
        return np.asarray(self.matrix.max(axis=0).toarray()).ravel().astype(np.int64)

    @cached_property
    def grid_min(self) -> np.ndarray:
        """m_{g,*} = min over the users present in grid g of m_{g,ℓ}."""
        csc = self.csc
        starts = csc.indptr[:-1]
        return np.minimum.reduceat(csc.data, starts).astype(np.int64)

    @property
    def degradation(self) -> int:
        """K = max_ℓ G_ℓ, the composition factor of seed 002 Corollary II.1."""
        return int(self.user_occupancy.max())

    def grid_counts(self, grid: Any) -> tuple[np.ndarray, np.ndarray]:
        """(user labels, counts) of one grid, by label."""
        j = self.grid_index([grid])[0]
        sl = slice(self.csc.indptr[j], self.csc.indptr[j + 1])
        return self.users[self.csc.indices[sl]], self.csc.data[sl].copy()

    # ---------------------------------------------------------------- label lookup
    @cached_property
    def _user_pos(self) -> dict[Any, int]:
        return {lab: i for i, lab in enumerate(self.users.tolist())}

    @cached_property
    def _grid_pos(self) -> dict[Any, int]:
        return {lab: i for i, lab in enumerate(self.grids.tolist())}

    def user_index(self, labels: Iterable[Any]) -> np.ndarray:
        """Row indices of user labels (``DpoptInputError`` for an unknown label)."""
        return self._lookup(labels, self._user_pos, "user")

    def grid_index(self, labels: Iterable[Any]) -> np.ndarray:
        """Column indices of grid labels (``DpoptInputError`` for an unknown label)."""
        return self._lookup(labels, self._grid_pos, "grid")

    @staticmethod
    def _lookup(labels: Iterable[Any], pos: dict[Any, int], what: str) -> np.ndarray:
        out = []
        for lab in labels:
            key = lab.item() if isinstance(lab, np.generic) else lab
            if key not in pos:
                raise DpoptInputError(f"unknown {what} label {_show(lab)}")
            out.append(pos[key])
        return np.asarray(out, dtype=np.int64)

    def pair_index(self, pairs: Any) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cols) of an iterable of (user, grid) label pairs, each of which must be occupied."""
        if pairs is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        try:
            pairs = list(pairs)
        except TypeError:  # a number (suppressed=0): no pairs at all
            raise DpoptInputError(f"`suppressed` must be (user, grid) pairs; got {_show(pairs)}") from None
        if not pairs:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        try:
            us, gs = zip(*pairs)
        except (TypeError, ValueError) as exc:
            raise DpoptInputError(
                f"`suppressed` must be (user, grid) pairs; got {_show(pairs)}"
            ) from exc
        rows = self.user_index(us)
        cols = self.grid_index(gs)
        present = np.asarray(self.matrix[rows, cols]).ravel() > 0
        if not np.all(present):
            k = int(np.flatnonzero(~present)[0])
            raise DpoptInputError(
                f"`suppressed` pair {_show(pairs[k])} is not an occupied (user, grid) entry"
            )
        return rows, cols

    def retained_matrix(self, suppressed: Any = None) -> sp.csr_array:
        """The count matrix with the suppressed (user, grid) pairs set to 0 (Γ = 0)."""
        if suppressed is None:
            return self.matrix
        rows, cols = self.pair_index(suppressed)
        if rows.size == 0:
            return self.matrix
        drop = sp.csr_array(
            (np.ones(rows.size, dtype=np.int64), (rows, cols)), shape=self.matrix.shape
        )
        out = self.matrix - self.matrix * (drop > 0)
        out.eliminate_zeros()
        return sp.csr_array(out)

    def suppress(self, suppressed: Any) -> "Occupancy":
        """A new Occupancy without the suppressed pairs (users/grids left empty are dropped)."""
        mat = self.retained_matrix(suppressed).tocoo()
        return Occupancy.from_triples(self.users[mat.row], self.grids[mat.col], mat.data)

    # ---------------------------------------------------------------- conversions
    def to_triples(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(user labels, grid labels, counts) of every stored entry, in row-major order."""
        coo = self.matrix.tocoo()
        return self.users[coo.row], self.grids[coo.col], coo.data.copy()

    def to_frame(self) -> Any:
        """A pandas DataFrame with columns user, grid, count."""
        import pandas as pd

        u, g, c = self.to_triples()
        return pd.DataFrame({"user": u, "grid": g, "count": c})

    def to_dense(self) -> np.ndarray:
        return self.matrix.toarray()

    def to_networkx(self) -> Any:
        """The bipartite user–grid graph: nodes ``("user", label)`` and ``("grid", label)``.

        Node attribute ``bipartite`` is 0 for users and 1 for grids; edge attribute ``count``.
        """
        import networkx as nx

        graph = nx.Graph()
        graph.add_nodes_from((("user", u) for u in self.users.tolist()), bipartite=0)
        graph.add_nodes_from((("grid", g) for g in self.grids.tolist()), bipartite=1)
        u, g, c = self.to_triples()
        graph.add_edges_from(
            (("user", a), ("grid", b), {"count": int(k)})
            for a, b, k in zip(u.tolist(), g.tolist(), c.tolist())
        )
        return graph

    def component_labels(self) -> np.ndarray:
        """Connected component of each grid in the user–grid graph (scipy, no Python loop)."""
        L, G = self.matrix.shape
        coo = self.matrix.tocoo()
        adj = sp.coo_array(
            (np.ones(coo.nnz), (coo.row, L + coo.col)), shape=(L + G, L + G)
        )
        _, labels = sp.csgraph.connected_components(adj, directed=False)
        return labels[L:]

    def components(self) -> list["Occupancy"]:
        """Split into independent sub-occupancies (connected components), largest first."""
        labels = self.component_labels()
        coo = self.matrix.tocoo()
        comp_of_entry = labels[coo.col]
        order = np.argsort(comp_of_entry, kind="stable")
        bounds = np.flatnonzero(np.diff(comp_of_entry[order])) + 1
        parts = []
        for idx in np.split(order, bounds):
            parts.append(
                Occupancy.from_triples(self.users[coo.row[idx]], self.grids[coo.col[idx]], coo.data[idx])
            )
        parts.sort(key=lambda o: -o.n_pairs)
        return parts

    def __iter__(self) -> Iterator[tuple[Any, Any, int]]:
        u, g, c = self.to_triples()
        return iter(zip(u.tolist(), g.tolist(), c.tolist()))

    def __repr__(self) -> str:
        return f"Occupancy(users={self.n_users}, grids={self.n_grids}, pairs={self.n_pairs}, K={self.degradation})"
