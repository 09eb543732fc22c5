# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # From a pandas DataFrame to a published release and its report
#
# A notebook in jupytext's percent format (open it in Jupyter with jupytext, or run it as a script:
# `python examples/release_notebook.py`). It releases the per-hexagon, per-hour mean bus speed of
# one real Austin day under user-level differential privacy (ε = 10 for each bus over the whole
# day), writes the publishable folder, renders `report.html` from the **published files only**, and
# plots the released means with their 95 % intervals against the public number of buses per cell.
#
# Output goes to `$DPOPT_OUT` if set, else to a fresh folder `./release_notebook-output[-k]`.

# %%
import json
import os
import webbrowser
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from dpopt.datasets import load_austin_sample
from dpopt.release import Budget, PublicOccupancyOptions, release, write_release
from dpopt.writers.html import write_html_report


def fresh_folder(name: str) -> Path:
    given = os.environ.get("DPOPT_OUT")
    if given:
        return Path(given)
    path, k = Path.cwd() / f"{name}-output", 2
    while path.exists():
        path, k = Path.cwd() / f"{name}-output-{k}", k + 1
    return path


records = load_austin_sample()  # any DataFrame with user_id, timestamp, latitude, longitude, value
records.head()

# %% [markdown]
# ## Release
# `public-occupancy`: which bus was in which hexagon and hour is public (positions are broadcast);
# the speeds are protected. The budget planner publishes the cells whose mean it can serve within
# ± 20 km/h (95 %, noise) and withholds the others; `time_limit` bounds each MILP solve (seconds).

# %%
result = release(records, bound=120, budget=Budget(epsilon_total=10),
                 model=PublicOccupancyOptions(target=20, time_limit=1))
out = fresh_folder("release_notebook") / "release"
paths = write_release(result, out, make_map=False)  # the map is in report.html
sorted(p.name for p in paths.values())

# %% [markdown]
# ## The report, from the published files only
# `report.html` is one self-contained page: a one-minute summary, the map (value and uncertainty,
# a time control; hover a hexagon for its value ± interval), the table and the methods.

# %%
table = pd.read_csv(out / "release.csv")
summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
report = write_html_report(out / "report.html", table, summary, unit="km/h")
print(f"report: {report}")
if os.environ.get("DPOPT_OPEN_REPORT", "1") == "1":
    webbrowser.open(report.as_uri())

# %% [markdown]
# ## Released means and their intervals against the public counts
# The interval is mean ± mean_error_bound cut to the public range [0, 120] km/h.

# %%
rel = table[table["released"]]
lo = np.clip(rel["mean"] - rel["mean_error_bound"], 0, summary["bound"])
hi = np.clip(rel["mean"] + rel["mean_error_bound"], 0, summary["bound"])
fig = Figure(figsize=(7, 4.2), layout="constrained")
ax = fig.add_subplot()
ax.errorbar(rel["n_users"], rel["mean"], yerr=[rel["mean"] - lo, hi - rel["mean"]], fmt="o",
            color="#2c728e", ecolor="#9ab", capsize=3)
ax.set_xlabel("buses in the hexagon-hour (public count)")
ax.set_ylabel("released mean speed (km/h), 95 % interval")
ax.set_title(f"{len(rel)} released cells, ε = {summary['epsilon_total']:g} per bus")
fig.savefig(out.parent / "means_vs_counts.png", dpi=120)
fig
