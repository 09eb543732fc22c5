"""Tumult Analytics as a benchmark peer, run in its own virtualenv.

Tumult Analytics 0.21 pins numpy < 2 and pandas < 2, which dpopt cannot run with, so it lives in a
separate environment and ``bench_multires.py --tumult PYTHON`` calls this script with that
environment's interpreter::

    python3 -m venv ~/tmltvenv && ~/tmltvenv/bin/pip install tmlt.analytics pyarrow
    python tests/benchmarks/bench_multires.py --data day --only-tumult ~/tmltvenv/bin/python

Input: a Parquet file of records (``user`` int, ``grid`` int, ``v`` float in [0, U]) and a JSON
job (ε, δ, U, the public grid keys or none, and a list of (k, c) bounds). For each (k, c) one
Session with the whole budget (``PureDPBudget(ε)``, or ``ApproxDPBudget(ε, δ)`` with private
keys), privacy unit ``AddRowsWithID("user")``, ``MaxGroupsPerID("grid", k)`` and
``MaxRowsPerGroupPerID("grid", c)`` enforced by Tumult itself, and per grid
``average("v", 0, U)`` (Tumult's own mean mechanism) over the public ``KeySet`` of grids, or
over the keys Tumult releases with ``get_groups`` at half the budget, each user bounded to
``MaxRowsPerID(k·c)`` rows there (private selection; ApproxDP, δ on the keys only).
Output: one Parquet file per (k, c) with columns ``grid``, ``mean`` (NaN where Tumult returned
none) and the wall seconds in the job's result JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(records_path: str, job_path: str, out_prefix: str) -> None:
    import pandas as pd
    from pyspark.sql import SparkSession
    from tmlt.analytics import (AddRowsWithID, ApproxDPBudget, KeySet, MaxGroupsPerID, MaxRowsPerGroupPerID,
                                MaxRowsPerID, PureDPBudget, QueryBuilder, Session)

    job = json.loads(open(job_path).read())
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable  # workers: this venv
    spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "6g")
             .config("spark.sql.shuffle.partitions", "8").config("spark.ui.enabled", "false")
             .config("spark.sql.warehouse.dir", os.path.join(os.path.dirname(os.path.abspath(out_prefix)), "warehouse"))
             .getOrCreate())  # Tumult writes tables: keep them in the job's temporary folder, not the cwd
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.createDataFrame(pd.read_parquet(records_path))
    eps, delta, U = float(job["epsilon"]), float(job.get("delta", 0.0)), float(job["bound"])
    walls = []
    for k, c in job["bounds"]:
        t0 = time.perf_counter()
        budget = PureDPBudget(eps) if delta == 0 else ApproxDPBudget(eps, delta)
        session = Session.from_dataframe(privacy_budget=budget, source_id="records", dataframe=df,
                                         protected_change=AddRowsWithID("user"))
        base = QueryBuilder("records").enforce(MaxGroupsPerID("grid", int(k))).enforce(
            MaxRowsPerGroupPerID("grid", int(c)))
        if job.get("keys") is not None:
            keys = KeySet.from_dict({"grid": [int(g) for g in job["keys"]]})
            query_budget = budget
        else:  # private selection: half the budget releases the keys, half the means
            half = PureDPBudget(eps / 2) if delta == 0 else ApproxDPBudget(eps / 2, delta)
            # get_groups needs a bound on each ID's rows: k groups of c rows, i.e. k·c rows per user
            groups = session.evaluate(QueryBuilder("records").enforce(MaxRowsPerID(int(k) * int(c)))
                                      .get_groups(["grid"]), half)
            keys = KeySet.from_dataframe(groups)
            query_budget = PureDPBudget(eps / 2) if delta == 0 else ApproxDPBudget(eps / 2, 0.0)
        if keys.dataframe().count() == 0:
            out = pd.DataFrame({"grid": pd.Series([], dtype="int64"), "mean": pd.Series([], dtype="float64")})
        else:
            res = session.evaluate(base.groupby(keys).average("v", low=0.0, high=U, name="mean"), query_budget)
            out = res.toPandas()[["grid", "mean"]]
        walls.append(time.perf_counter() - t0)
        out.to_parquet(f"{out_prefix}_{k}_{c}.parquet")
    open(f"{out_prefix}_walls.json", "w").write(json.dumps(walls))
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
