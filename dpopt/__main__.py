"""``python -m dpopt``: the command line (see :mod:`dpopt.cli.main`)."""

from dpopt.cli.main import main

raise SystemExit(main())
