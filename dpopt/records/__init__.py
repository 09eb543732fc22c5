"""Layer 1 — records: read, clean, key every record by its finest grid (H3 cell × slot).

Output: the contributions table, one row per (user, finest grid) with the record count and the exact
lattice sums both privacy models need. Nothing privacy-specific. Runs locally (streaming, bounded
memory) and on Dask.
"""
