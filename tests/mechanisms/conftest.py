"""Named tolerances of the mechanism tests."""

from __future__ import annotations

#: brute-force sensitivity vs the closed form the mechanism uses (float rounding only)
SENS_ATOL = 1e-9
#: Monte-Carlo checks: allowed deviation in standard errors
MC_SIGMAS = 5.0
