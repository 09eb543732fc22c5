"""Progress of the suppression solvers: a tqdm bar (opt-in) and a log kept in ``plan.info["log"]``."""

from __future__ import annotations

import math
import time
from typing import Any

__all__ = ["Progress"]


class Progress:
    """Record (stage, incumbent K, lower bound, gap, elapsed) events; show them on a tqdm bar.

    Parameters
    ----------
    enabled : bool
        Show a tqdm bar on stderr (off by default in the API; the CLI's ``--progress``).
    desc : str
        The bar's label.
    total : float, optional
        Seconds of the time budget (the bar then counts elapsed seconds against it).
    """

    def __init__(self, enabled: bool = False, desc: str = "suppress", total: float | None = None) -> None:
        self.t0 = time.perf_counter()
        self.log: list[dict[str, Any]] = []
        #: fields added to every event (e.g. the component being solved)
        self.context: dict[str, Any] = {}
        self._bar = None
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                raise ImportError("progress=True needs tqdm: pip install 'dpopt[release]' (or pip install tqdm)") from None

            tot = None if total is None or not math.isfinite(total) else float(total)
            fmt = "{l_bar}{bar}| {n:.0f}/{total_fmt} s {postfix}" if tot else "{desc}: {n:.0f} s {postfix}"
            self._bar = tqdm(total=tot, desc=desc, unit="s", leave=False, bar_format=fmt)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def update(self, stage: str, incumbent: float | None = None, bound: float | None = None,
               **extra: Any) -> None:
        """Append an event; ``gap`` = (incumbent − bound)/incumbent when both are known."""
        gap = None
        if incumbent is not None and bound is not None and math.isfinite(bound) and incumbent > 0:
            gap = max(0.0, (incumbent - bound) / incumbent)
        event = {"stage": stage, "elapsed": round(self.elapsed, 3), "incumbent": incumbent,
                 "bound": bound, "gap": gap, **self.context, **extra}
        self.log.append(event)
        if self._bar is not None:
            post = {"stage": stage}
            if incumbent is not None:
                post["K"] = incumbent
            if bound is not None:
                post["bound"] = bound
            if gap is not None:
                post["gap"] = f"{gap:.2%}"
            self._bar.set_postfix(post, refresh=False)
            if self._bar.total is not None:
                self._bar.n = min(self.elapsed, self._bar.total)
            else:
                self._bar.n = self.elapsed
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
