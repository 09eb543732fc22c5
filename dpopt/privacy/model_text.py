"""The privacy model of ``dpopt release``, in words for a data holder (one text, used everywhere).

The release is user-level DP under the **public-occupancy** model of seed 002 (§II-C): two
datasets are neighbours when they differ in the *values* of one user's records only; which user
has how many records in which grid (the occupancy array) is the same in both, i.e. treated as
public. The CLI help (``dpopt release --help``), report.md, README's release section and
models/release.md all show :data:`PRIVACY_MODEL_TEXT`.
"""

from __future__ import annotations

__all__ = ["PRIVACY_MODEL", "PRIVACY_MODEL_SUMMARY", "PRIVACY_MODEL_TEXT", "USER_MODEL_TEXT", "USER_ID_RULE", "VALUE_DEPENDENT_INGEST",
           "privacy_model_lines"]

#: name of the neighbour relation
PRIVACY_MODEL = "public-occupancy"

#: one sentence for summary.json
PRIVACY_MODEL_SUMMARY = (
    "Neighbouring datasets differ in the values of one user's records; which user has how many "
    "records in which grid is treated as public (fits vehicle positions that are broadcast anyway, "
    "not payments, phones or app traces)."
)

#: ingest counts that depend on the values (e.g. how many were clipped): diagnostics for the data
#: holder, never published as such (a neighbour with one value 100 vs 130 at U = 120 would change
#: them). Under ``out_of_range="drop"`` the occupancy itself depends on values and the published
#: record counts reveal how many were dropped; report.md states that caveat (use "clip").
VALUE_DEPENDENT_INGEST: frozenset[str] = frozenset({"out_of_range", "clipped", "dropped_out_of_range"})

#: the model in plain words (one paragraph per item)
PRIVACY_MODEL_TEXT: tuple[str, ...] = (
    "Privacy model: public-occupancy. Neighbouring datasets differ in the values (e.g. speeds) of "
    "one user's records; which user has how many records in which cell and time slot is the same "
    "in both, i.e. treated as public. The mean and variance of every grid are protected with "
    "user-level differential privacy; the counts per grid (users, records, records kept) are "
    "published without noise.",
    "It fits data whose positions are public or broadcast anyway, such as vehicle positions of a "
    "bus fleet or of ships and aircraft that broadcast them.",
    "It does NOT fit data where presence itself is sensitive: payments, phone locations, app "
    "traces. There, who was where and how often is the secret, and this release would disclose it.",
)


#: the ``user`` model (dpopt.privacy.user) in plain words
USER_MODEL_TEXT: tuple[str, ...] = (
    "Privacy model: user (the default). Neighbouring datasets differ by adding or removing ALL the "
    "records of one user. Nothing about who was where is public: contribution bounds (records per user; "
    "with --strategy place/adaptive/fixed, grids per user and records per grid) are chosen under DP, counts are released only with noise, and grids "
    "come from a public list (--partitions) or are selected privately (needs --delta). Without a list "
    "the release treats as public only the grid definition, the value range [L, U], the options and "
    "the public calendar it cuts time by (windows of the day, 3640-day periods; --strategy adaptive: "
    "the levels of a public hierarchy of H3 parents x longer slots and the hash order in which users' "
    "nodes are kept); nothing about occupancy is public: which cells are published is itself a DP "
    "selection.",
    "It fits any data, including payments, phone locations and app traces.",
)

#: the one rule for user ids (:func:`dpopt._validation.label_parts`), shown in --help and README
USER_ID_RULE = (
    "User ids: dpopt never merges two distinct ids. An id read as text (every CSV column; string columns "
    "of Parquet or DataFrames) is kept exactly as written: \"0123\", \"123\", \"1e3\" and \" 123\" are four "
    "users. An id in a numeric column is its value: 7 and 7.0 in one float column are one user, and two "
    "different numbers are never one user. A column mixing numbers and text is refused. Empty, blank, "
    "NaN or infinite ids are missing. Write each user's id the same way throughout the data."
)


def privacy_model_lines(prefix: str = "") -> list[str]:
    """:data:`PRIVACY_MODEL_TEXT` as lines, each paragraph prefixed (e.g. ``"- "`` for Markdown)."""
    return [prefix + p for p in PRIVACY_MODEL_TEXT]
