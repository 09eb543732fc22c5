"""Release per-hexagon, per-hour mean and variance of bus speeds with user-level DP.

Runs the whole pipeline on the embedded Austin bus day (53,569 records, 146 buses): H3 resolution 7
x 1-hour slots, U = 120 km/h, eps = 1 per grid, CLIP-USER plan; writes the release files to the
folder given as argument (default: a fresh folder under the current directory).

    python examples/release_austin.py [OUT_DIR]
"""

import sys

from _driver import output_dir

from dpopt.release import GridOptions, PerGridBudget, PublicOccupancyOptions, load_austin_sample, release, write_release

records = load_austin_sample()  # columns user_id, timestamp, latitude, longitude, value (km/h)
result = release(records, bound=120.0, budget=PerGridBudget(1.0), model=PublicOccupancyOptions(plan="greedy"),
                 grid=GridOptions(h3_resolution=7, slot="1h"))
s = result.summary
print(f"{s.users} buses, {s.grids} grids; K = {s.degradation} (was {s.degradation_baseline}) "
      f"-> {s.epsilon_total:g}-user-level DP in total; worst-case error E = {s.error_bound:.1f}")
print(result.table[["cell", "slot", "n_users", "n_records", "mean", "variance"]].nlargest(5, "n_records"))
paths = write_release(result, output_dir(sys.argv[1] if len(sys.argv) > 1 else None, __file__))
print("wrote", ", ".join(str(p) for p in paths.values()))
