"""Aggregate on Dask (same counts as the local path), then plan and release locally.

Needs `pip install 'dask[dataframe,distributed]'`. Replace the LocalCluster by
`Client("tcp://scheduler:8786")` to use a real cluster (the records path must be readable by the
workers, e.g. a shared file system or s3://... with s3fs installed).
"""

import numpy as np
from distributed import Client, LocalCluster

from dpopt.release import InputOptions, PerGridBudget, PublicOccupancyOptions, austin_sample_path, contributions, \
    release_aggregate

if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        agg_d, ingest = contributions(austin_sample_path(), bound=120.0,
                                      io=InputOptions(backend="dask", client=client))
    agg_l, _ = contributions(austin_sample_path(), bound=120.0)
    same = all(np.array_equal(getattr(agg_d, f), getattr(agg_l, f))
               for f in ("users", "cells", "slots", "pair_user", "pair_grid", "count"))
    print(f"Dask and local aggregation give identical counts: {same}")
    r = release_aggregate(agg_d, PerGridBudget(1.0), PublicOccupancyOptions(plan="greedy"), bound=120.0,
                          ingest=ingest)
    print(f"K = {r.summary.degradation}, total eps = {r.summary.epsilon_total:g}")
