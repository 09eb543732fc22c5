"""pandas tables for result objects, imported on use (pandas comes with the ``release`` extra)."""

from __future__ import annotations

from typing import Any


def frame(data: Any, **kwargs: Any) -> Any:
    """``pandas.DataFrame(data, **kwargs)``, or an ImportError that says how to get pandas."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("tables (to_frame, dpopt.sweep) need pandas: pip install 'dpopt[release]' "
                          "(or pip install pandas)") from None
    return pd.DataFrame(data, **kwargs)
