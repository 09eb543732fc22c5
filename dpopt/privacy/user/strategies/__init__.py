"""The named strategies of the ``user`` model: fixed choices of what to measure, each returning
:class:`dpopt.measurements.Measurements` (``UserOptions(strategy=...)``; the default, "optimised",
is :mod:`dpopt.privacy.user.engine`).

* :mod:`.fixed`: the flat per-grid release at the finest resolution (a list or private selection);
* :mod:`.adaptive`: every level of the public hierarchy over a public list;
* :mod:`.private_adaptive`: private selection of nodes at a few levels, then their measurement;
* :mod:`.place`: the finest cells over the whole period and the map, under a record cap.
"""
