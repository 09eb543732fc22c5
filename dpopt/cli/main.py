"""The ``dpopt`` entry point: the parser and the dispatch to one sub-command.

Each sub-command is one module of :mod:`dpopt.cli` (listed in :data:`COMMANDS`) that defines
``register(subparsers)``; :func:`main` imports only the module of the command it runs (``dpopt --help``
lists the commands from :data:`HELP` without importing any). Input errors print one line
(``dpopt: error: ...``) and exit with status 2; ``--json`` prints machine-readable output on stdout.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .._validation import DpoptInputError, reads_as_number

__all__ = ["main", "build_parser", "COMMANDS"]

#: sub-command name -> module defining ``register(subparsers)``
COMMANDS: dict[str, str] = {
    "errors": "dpopt.cli.errors",
    "demo": "dpopt.cli.demo",
    "clipping": "dpopt.cli.clipping",
    "arrays": "dpopt.cli.arrays",
    "suppress": "dpopt.cli.suppress",
    "reproduce": "dpopt.cli.reproduce",
    "release": "dpopt.cli.release",
}


#: one-line help of each sub-command (shown by ``dpopt --help`` without importing the commands)
HELP: dict[str, str] = {
    "errors": "exact sensitivities and worst-case errors of a clipped mean/variance",
    "demo": "a short tour of dpopt's models on small built-in instances",
    "clipping": "optimal per-user clipping intervals (seeds 000/001)",
    "arrays": "array length m for pseudo-user Array-Averaging (seed 003)",
    "suppress": "grid suppression (seed 002): greedy CLIP-USER, exact MILP, or the privacy–error frontier",
    "reproduce": "rerun a figure of the seed papers (CSV + PNG + notes)",
    "release": "user-level DP release of per-(H3 cell, time slot) means and variances from records",
}


class _OneLineParser(argparse.ArgumentParser):
    """argparse with its errors in one line (``dpopt release: error: argument --lower: invalid float
    value: 'abc'``) and exit 2, like every other refusal of the CLI; ``--help`` still shows the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``dpopt`` parser; with ``command``, only that sub-command's module is imported (the others
    are listed with their :data:`HELP` line)."""
    from .. import __version__

    parser = _OneLineParser(
        prog="dpopt", allow_abbrev=False,
        description="Optimisation models for user-level differentially private mean/variance release.",
    )
    parser.add_argument("--version", action="version", version=f"dpopt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if command is None or name == command:
            importlib.import_module(module_name).register(sub)
        else:
            sub.add_parser(name, help=HELP.get(name), add_help=False)
    return parser


def _command_of(argv: Sequence[str]) -> str:
    """The sub-command named in ``argv`` ("" when none: ``dpopt --help``, ``dpopt --version``)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else ""
    return ""


def _unknown_flags(parser: argparse.ArgumentParser, args: argparse.Namespace, unknown: list[str]) -> None:
    """Exit 2 naming the first unknown argument and, for a flag, the nearest valid one (difflib)."""
    import difflib

    sub = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and getattr(args, "command", None) in action.choices:
            sub = action.choices[args.command]
    flag = unknown[0].split("=", 1)[0]
    valid = sorted(s for a in sub._actions for s in a.option_strings if s.startswith("--"))
    near = difflib.get_close_matches(flag, valid, n=1, cutoff=0.6) if flag.startswith("-") else []
    sub.error(f"unrecognized arguments: {' '.join(unknown)}" + (f" (did you mean {near[0]}?)" if near else ""))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dpopt`` command line.

    Parameters
    ----------
    argv
        The arguments after the program name; ``None`` reads ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status: 0 on success, 2 for bad input (one line on stderr, no traceback); argparse
        exits 2 itself on a bad flag; 130 on Ctrl-C (one line, no traceback; a release's half-written
        folder is removed on the way out, as on SIGTERM, which exits 143).
    """
    argv = _negative_values(sys.argv[1:] if argv is None else list(argv))
    parser = build_parser(_command_of(argv))
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _unknown_flags(parser, args, unknown)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    previous = _on_terminate()
    try:
        return int(args.func(args) or 0)
    except DpoptInputError as exc:
        print(f"dpopt {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError, NotADirectoryError, FileExistsError) as exc:
        print(f"dpopt {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:  # any input file (counts, occupancy, records) that is not UTF-8
        print(f"dpopt {args.command}: error: an input file is not UTF-8 text ({exc.reason}, byte "
              f"{exc.object[exc.start:exc.start + 1]!r} at offset {exc.start}); convert it to UTF-8", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: the writers' cleanup has run on the way out; no traceback
        print(f"dpopt {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `dpopt ... | head`: the reader left; not an error of ours
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:  # any other refusal of a path the user named (a name too long, a symlink loop)
        print(f"dpopt {args.command}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    finally:
        _restore_terminate(previous)


def _negative_values(argv: list[str]) -> list[str]:
    """``--lower -1e6`` as ``--lower=-1e6``: argparse reads a value such as -1e6 (an exponent, which
    its negative-number rule does not cover) or -1h (a negative duration) as an unknown flag and says
    "expected one argument" under its usage text; joined, the option's own check names the value.
    No flag of dpopt starts with a minus and a digit."""
    out: list[str] = []
    for token in argv:
        prev = out[-1] if out else ""
        if (token.startswith("-") and prev.startswith("--") and "=" not in prev
                and (reads_as_number(token) or token[1:2].isdigit()) and not reads_as_number(prev)):
            out[-1] = f"{prev}={token}"
        else:
            out.append(token)
    return out


def _on_terminate() -> Any:
    """SIGTERM (``timeout``, a scheduler stopping the job) raises SystemExit(143), so the writers'
    cleanup runs as on Ctrl-C and no half-written folder is left; returns the handler it replaced
    (None off the main thread, where signals cannot be set)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def terminated(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, terminated)


def _restore_terminate(previous: Any) -> None:
    if previous is not None:
        import signal

        signal.signal(signal.SIGTERM, previous)

