"""The standard form every dpopt model builds: one object, translated by the back-ends.

A :class:`LinearModel` is

    minimise (or maximise)  c·x + offset
    subject to              row_lower ≤ A x ≤ row_upper
                            col_lower ≤ x ≤ col_upper,   x_j integer where integrality[j]

with ``A`` a sparse CSC matrix. Variables and constraints are grouped in named blocks
(``col_blocks["alpha"] = slice(0, L)``), the way linopy names its variable arrays, so a solution
can be read back by name. Models never import a solver: see :mod:`dpopt.solve.highs` and
:mod:`dpopt.solve.cvxpy_backend` (DESIGN convention 1, "model ≠ solve").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

__all__ = ["LinearModel", "ModelBuilder", "block_names"]


@dataclass(frozen=True, eq=False)
class LinearModel:
    """An LP/MILP in standard form (see module docstring)."""

    c: np.ndarray
    A: sp.csc_array
    row_lower: np.ndarray
    row_upper: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    integrality: np.ndarray | None = None
    sense: Literal["min", "max"] = "min"
    offset: float = 0.0
    col_blocks: dict[str, slice] = field(default_factory=dict)
    row_blocks: dict[str, slice] = field(default_factory=dict)
    name: str = "dpopt"
    #: labels of the labelled blocks (``{"alpha": ("u0", "u1", ...)}``); names are built only on
    #: request (:meth:`column_names`), so a model with 10^6 columns costs no Python loop to build
    col_labels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    row_labels: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = self.c.shape[0]
        m = self.row_lower.shape[0]
        if self.A.shape != (m, n):
            raise ValueError(f"`A` must have shape ({m}, {n}); got {self.A.shape}")
        for arr, nm, size in (
            (self.row_upper, "row_upper", m),
            (self.col_lower, "col_lower", n),
            (self.col_upper, "col_upper", n),
        ):
            if arr.shape != (size,):
                raise ValueError(f"`{nm}` must have shape ({size},); got {arr.shape}")
        if self.integrality is not None and self.integrality.shape != (n,):
            raise ValueError(f"`integrality` must have shape ({n},); got {self.integrality.shape}")
        if self.sense not in ("min", "max"):
            raise ValueError(f"`sense` must be 'min' or 'max'; got {self.sense!r}")
        for labels, blocks, nm in ((self.col_labels, self.col_blocks, "col_labels"),
                                   (self.row_labels, self.row_blocks, "row_labels")):
            for block, labs in labels.items():
                sl = blocks.get(block)
                if sl is None or len(labs) != sl.stop - sl.start:
                    raise ValueError(f"`{nm}[{block!r}]` must label every item of block {block!r}")

    def column_names(self) -> tuple[str, ...]:
        """One name per column: ``<block>_<label>`` (labelled blocks) or ``<block>_<i>``."""
        return block_names(self.col_blocks, self.col_labels, self.num_cols, "x")

    def constraint_names(self) -> tuple[str, ...]:
        """One name per row: ``<block>_<label>`` (labelled blocks) or ``<block>_<i>``."""
        return block_names(self.row_blocks, self.row_labels, self.num_rows, "r")

    @property
    def num_cols(self) -> int:
        return int(self.c.shape[0])

    @property
    def num_rows(self) -> int:
        return int(self.row_lower.shape[0])

    @property
    def is_mip(self) -> bool:
        return self.integrality is not None and bool(np.any(self.integrality))

    def objective_value(self, x: np.ndarray) -> float:
        """c·x + offset, for checking a solution independently of the solver."""
        return float(self.c @ x + self.offset)

    def max_violation(self, x: np.ndarray) -> float:
        """Largest violation of a row, a column bound or integrality by ``x`` (0 if feasible)."""
        ax = self.A @ x
        viol = [
            np.max(self.row_lower - ax, initial=0.0),
            np.max(ax - self.row_upper, initial=0.0),
            np.max(self.col_lower - x, initial=0.0),
            np.max(x - self.col_upper, initial=0.0),
        ]
        if self.is_mip:
            xi = x[self.integrality]
            viol.append(np.max(np.abs(xi - np.round(xi)), initial=0.0))
        return float(max(viol))


def block_names(blocks: dict[str, slice], labels: dict[str, tuple[str, ...]], size: int,
                prefix: str) -> tuple[str, ...]:
    """Names ``<block>_<label>`` (or ``<block>_<i>``) for every index; ``<prefix><i>`` outside blocks."""
    names = [f"{prefix}{i}" for i in range(size)]
    for block, sl in blocks.items():
        labs = labels.get(block)
        for k, i in enumerate(range(*sl.indices(size))):
            names[i] = f"{block}_{labs[k] if labs is not None else k}"
    return tuple(names)


def _check_labels(name: str, count: int, labels: Any) -> tuple[str, ...] | None:
    if labels is None:
        return None
    out = tuple(str(lab).replace(" ", "_") for lab in labels)
    if len(out) != count:
        raise ValueError(f"{name!r}: {count} items but {len(out)} labels")
    return out


class ModelBuilder:
    """Assemble a :class:`LinearModel` block by block from vectorised COO pieces.

    >>> b = ModelBuilder()
    >>> x = b.add_cols("x", 3, lower=0, upper=1, cost=[1, 2, 3])
    >>> b.add_rows("sum", rows=[0, 0, 0], cols=x, vals=[1, 1, 1], lower=1, upper=np.inf)
    slice(0, 1, None)
    >>> b.build().num_cols
    3
    """

    def __init__(self, name: str = "dpopt", sense: Literal["min", "max"] = "min") -> None:
        self.name = name
        self.sense = sense
        self._cost: list[np.ndarray] = []
        self._clo: list[np.ndarray] = []
        self._cup: list[np.ndarray] = []
        self._int: list[np.ndarray] = []
        self._rlo: list[np.ndarray] = []
        self._rup: list[np.ndarray] = []
        self._i: list[np.ndarray] = []
        self._j: list[np.ndarray] = []
        self._v: list[np.ndarray] = []
        self.col_blocks: dict[str, slice] = {}
        self.row_blocks: dict[str, slice] = {}
        self.n = 0
        self.m = 0
        self.offset = 0.0
        self._clabels: dict[str, tuple[str, ...]] = {}
        self._rlabels: dict[str, tuple[str, ...]] = {}

    def add_cols(
        self,
        name: str,
        count: int,
        *,
        lower: float | np.ndarray = 0.0,
        upper: float | np.ndarray = np.inf,
        cost: float | np.ndarray = 0.0,
        integer: bool = False,
        labels: Any = None,
    ) -> np.ndarray:
        """Add ``count`` variables; return their column indices.

        ``labels`` (one per variable, e.g. user ids) name the columns ``<name>_<label>`` in exported
        .lp/.mps files and in :meth:`~dpopt.solve.result.SolveResult.named_values`.
        """
        if name in self.col_blocks:
            raise ValueError(f"column block {name!r} already exists")
        labs = _check_labels(name, count, labels)
        if labs is not None:
            self._clabels[name] = labs
        idx = np.arange(self.n, self.n + count, dtype=np.int64)
        self._cost.append(np.broadcast_to(np.asarray(cost, float), (count,)).copy())
        self._clo.append(np.broadcast_to(np.asarray(lower, float), (count,)).copy())
        self._cup.append(np.broadcast_to(np.asarray(upper, float), (count,)).copy())
        self._int.append(np.full(count, bool(integer)))
        self.col_blocks[name] = slice(self.n, self.n + count)
        self.n += count
        return idx

    def add_rows(
        self,
        name: str,
        *,
        rows: np.ndarray,
        cols: np.ndarray,
        vals: np.ndarray | float,
        lower: float | np.ndarray,
        upper: float | np.ndarray,
        count: int | None = None,
        labels: Any = None,
    ) -> slice:
        """Add constraints ``lower ≤ Σ vals·x[cols] ≤ upper``; ``rows`` are local (0-based) row ids.

        ``labels`` (one per row) name the rows ``<name>_<label>`` (exports and named duals).
        """
        if name in self.row_blocks:
            raise ValueError(f"row block {name!r} already exists")
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        vals = np.broadcast_to(np.asarray(vals, float), rows.shape)
        k = int(rows.max()) + 1 if count is None else count
        if count is None and rows.size == 0:
            k = 0
        self._i.append(rows + self.m)
        self._j.append(cols)
        self._v.append(vals.astype(float, copy=True))
        self._rlo.append(np.broadcast_to(np.asarray(lower, float), (k,)).copy())
        self._rup.append(np.broadcast_to(np.asarray(upper, float), (k,)).copy())
        labs = _check_labels(name, k, labels)
        if labs is not None:
            self._rlabels[name] = labs
        self.row_blocks[name] = slice(self.m, self.m + k)
        self.m += k
        return self.row_blocks[name]

    def build(self) -> LinearModel:
        cat = lambda parts, dtype=float: (  # noqa: E731
            np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)
        )
        A = sp.coo_array(
            (cat(self._v), (cat(self._i, np.int64), cat(self._j, np.int64))), shape=(self.m, self.n)
        ).tocsc()
        A.sum_duplicates()
        integ = cat(self._int, bool)
        return LinearModel(
            c=cat(self._cost),
            A=A,
            row_lower=cat(self._rlo),
            row_upper=cat(self._rup),
            col_lower=cat(self._clo),
            col_upper=cat(self._cup),
            integrality=integ if integ.any() else None,
            sense=self.sense,
            offset=self.offset,
            col_blocks=dict(self.col_blocks),
            row_blocks=dict(self.row_blocks),
            name=self.name,
            col_labels=dict(self._clabels),
            row_labels=dict(self._rlabels),
        )
