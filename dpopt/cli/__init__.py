"""The ``dpopt`` command line: the entry point and one module per sub-command.

* :mod:`dpopt.cli.main` — the entry point :func:`main` (the ``dpopt`` script, ``python -m dpopt``)
  and the dispatch to a sub-command;
* :mod:`dpopt.cli.common` — what the sub-commands share: reading count files, printing text or
  JSON, the partition and solver flags;
* one module per sub-command, named after it: :mod:`~dpopt.cli.errors`, :mod:`~dpopt.cli.demo`,
  :mod:`~dpopt.cli.clipping`, :mod:`~dpopt.cli.arrays`, :mod:`~dpopt.cli.suppress`,
  :mod:`~dpopt.cli.reproduce`, :mod:`~dpopt.cli.release`.

The command line is the top layer: it imports the library, and no library module imports it
(``tests/test_layers.py``). The package exports the entry point, so ``from dpopt.cli import main``
gives the function; the module itself is ``sys.modules["dpopt.cli.main"]`` (``from dpopt.cli.main
import build_parser`` reads from it).
"""

from .main import COMMANDS, HELP, build_parser, main

__all__ = ["main", "build_parser", "COMMANDS", "HELP"]
