"""A HiGHS solve that cannot outlive its deadline: solved in a child process, killed at the deadline.

Used by every model that takes a ``time_limit`` (through :func:`dpopt.solve.bounded.solve_bounded`)
and by the budget planners.

HiGHS honours its ``time_limit`` and the interrupt callbacks of :func:`dpopt.solve.highs.solve_highs`
(``deadline``) only where it iterates (simplex, interior point, branch and bound). Presolve (probing)
and the MIP set-up before the root LP check neither: on a 2·10^4-grid synthetic budget MILP
(1.9·10^5 binary columns) under load, presolve took 110 s and the set-up 230 s more before the first
interrupt check, for a 20 s deadline . So the planner solves large models in a fresh
Python process (:func:`solve_isolated`) that gets the same deadline for its callback and is killed if
it has not answered by ``kill_at``: ``time_limit`` is then a hard bound on the planner's solve. A
killed solve returns no point; the planner keeps its greedy plan (status ``time_limit``).

The child reads the pickled model from a temporary file and writes its pickled
:class:`~dpopt.solve.SolveResult` back (no shared state, no fork of a threaded process). Deadlines
cross the process boundary as :func:`time.monotonic` instants (one system-wide clock on Linux and
macOS); the child converts them to its own :func:`time.perf_counter`.
"""

from __future__ import annotations

from .._validation import solver_options
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .model import LinearModel
from .result import SolveResult

__all__ = ["solve_isolated", "IsolatedSolve"]

#: seconds after ``deadline`` HiGHS's own ``time_limit`` is set to: a backstop behind the callback
BACKSTOP_SECONDS = 1.0
#: the child program (a module function, so the caller's ``__main__`` is never re-imported)
_CHILD = "from dpopt.solve.isolated import _child_main; _child_main()"


@dataclass(frozen=True)
class IsolatedSolve:
    """What :func:`solve_isolated` did: killed at ``kill_at``?, wall seconds, the child's exit code and
    peak resident memory (MiB; ``nan`` when it was killed); ``stalled``: killed at ``stall_at``
    because HiGHS had not reached its first interrupt check (still in presolve or the MIP set-up)."""

    killed: bool
    seconds: float
    returncode: int | None
    child_peak_rss_mib: float
    stalled: bool = False


def solve_isolated(model: LinearModel, *, deadline: float, kill_at: float, options: Mapping[str, Any] | None = None,
                   warm_start: np.ndarray | None = None, stall_at: float | None = None
                   ) -> tuple[SolveResult | None, IsolatedSolve]:
    """Solve ``model`` with HiGHS in a child process interrupted at ``deadline``, killed at ``kill_at``.

    Parameters
    ----------
    model : LinearModel
    deadline, kill_at : float
        :func:`time.perf_counter` instants of this process: the interrupt callback's deadline
        (HiGHS's ``time_limit`` is :data:`BACKSTOP_SECONDS` later) and the hard kill
        (``kill_at >= deadline``).
    options, warm_start
        As for :func:`dpopt.solve.highs.solve_highs`.
    stall_at : float, optional
        A :func:`time.perf_counter` instant: the child is killed then (``stalled=True``) unless HiGHS
        has made its first interrupt check by then (it checks none in presolve and the MIP set-up).

    Returns
    -------
    (SolveResult or None, IsolatedSolve)
        ``None`` when the child was killed (at ``stall_at`` or ``kill_at``): no point, no bound.

    Raises
    ------
    RuntimeError
        The child failed (an exception in HiGHS or the interpreter), with its last error output.
    """
    t0 = time.perf_counter()
    offset = time.monotonic() - t0  # perf_counter instant → monotonic instant
    with tempfile.TemporaryDirectory(prefix="dpopt-solve-") as tmp:
        src, dst, beat = Path(tmp) / "job.pkl", Path(tmp) / "result.pkl", Path(tmp) / "beat"
        job = {"model": model, "deadline": deadline + offset, "options": solver_options(options),
               "warm_start": None if warm_start is None else np.asarray(warm_start, float),
               "heartbeat": str(beat)}
        with open(src, "wb") as f:
            pickle.dump(job, f, protocol=pickle.HIGHEST_PROTOCOL)
        root = str(Path(__file__).resolve().parents[2])  # the dpopt this process runs
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
        with open(Path(tmp) / "stderr.txt", "w+") as err:
            proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(src), str(dst)], env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
            outcome = _wait(proc, kill_at, stall_at, beat)
            err.seek(0)
            if outcome == "done" and (proc.returncode != 0 or not dst.exists()):  # a failure, not a limit
                raise RuntimeError(f"the HiGHS solver process failed (exit {proc.returncode}): "
                                   + err.read()[-2000:].strip())
        result, peak = None, float("nan")
        if outcome == "done":
            with open(dst, "rb") as f:
                result, peak = pickle.load(f)
        done = IsolatedSolve(killed=outcome != "done", seconds=time.perf_counter() - t0,
                             returncode=proc.returncode, child_peak_rss_mib=peak, stalled=outcome == "stalled")
    return result, done


#: seconds between two looks at the child while waiting for its first interrupt check
_POLL_SECONDS = 0.05


def _wait(proc: subprocess.Popen, kill_at: float, stall_at: float | None, beat: Path) -> str:
    """Wait for the child: ``"done"``, or ``"stalled"``/``"killed"`` after killing it."""
    if stall_at is not None:
        while time.perf_counter() < min(stall_at, kill_at) and not beat.exists():
            try:
                proc.wait(timeout=_POLL_SECONDS)
                return "done"
            except subprocess.TimeoutExpired:
                pass
        if not beat.exists() and proc.poll() is None:
            proc.kill()
            proc.wait()
            return "stalled"
    try:
        proc.wait(timeout=max(kill_at - time.perf_counter(), 0.0))
        return "done"
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return "killed"


def _peak_rss_mib() -> float:
    """Peak resident memory of this process in MiB (VmHWM; nan where /proc is missing)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _child_main() -> None:
    """The child: ``argv[1]`` the pickled job, ``argv[2]`` where the pickled (result, peak MiB) goes."""
    from .highs import solve_highs as solve

    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    with open(src, "rb") as f:
        job = pickle.load(f)
    left = job["deadline"] - time.monotonic()
    beat = job.get("heartbeat")
    res = solve(job["model"], time_limit=max(left, 0.0) + BACKSTOP_SECONDS, options=job["options"],
                warm_start=job["warm_start"], deadline=time.perf_counter() + left,
                heartbeat=None if beat is None else Path(beat).touch)
    part = dst.with_suffix(".part")
    with open(part, "wb") as f:
        pickle.dump((res, _peak_rss_mib()), f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(part, dst)
