"""``python -m dpopt``: the command line (see :mod:`dpopt.cli`)."""

from dpopt.cli import main

raise SystemExit(main())
