"""One grid option and one input option for the records layer and the front door."""

from __future__ import annotations

import pickle
import warnings

import pytest

import dpopt.records as records
from dpopt import DpoptInputError
from dpopt.privacy.contributions import InputOptions as FrontInput
from dpopt.records import DEFAULT_MAX_DROPPED, GridOptions, InputOptions
from dpopt.records.ingest import DEFAULT_CHUNKSIZE
from dpopt.release import GridOptions as FrontGrid


def test_the_front_door_and_the_records_layer_share_one_class_each():
    assert FrontGrid is GridOptions and FrontInput is InputOptions
    import dpopt.release as front

    assert front.InputOptions is InputOptions


def test_defaults_and_the_dropped_share():
    io = InputOptions()
    assert io.chunksize == DEFAULT_CHUNKSIZE and io.max_dropped is None and io.dropped_limit == DEFAULT_MAX_DROPPED
    assert InputOptions(max_dropped=0.2).dropped_limit == 0.2
    assert InputOptions(chunksize=None).chunksize == DEFAULT_CHUNKSIZE  # the CLI's unset --chunksize
    assert InputOptions(time_window="default").time_window == InputOptions().time_window
    assert GridOptions(7, "60min").slot == "1h" and GridOptions(7, "60min").slot_ns == 3600 * 10**9


@pytest.mark.parametrize("kwargs, word", [({"chunksize": 0}, "chunksize"), ({"max_dropped": 1.5}, "max_dropped"),
                                          ({"backend": "spark"}, "backend"), ({"client": object()}, "client"),
                                          ({"sep": "ab"}, "sep"), ({"time_window": "2000"}, "time_window")])
def test_bad_input_options_name_the_argument(kwargs, word):
    with pytest.raises(DpoptInputError, match=f"`{word}`"):
        InputOptions(**kwargs)


def test_a_worker_never_gets_the_client():
    class Client:  # stands for distributed.Client: not picklable
        def __reduce__(self):
            raise TypeError("cannot pickle a client")

    io = InputOptions(backend="dask", client=Client())
    shipped = io.for_workers()
    assert shipped.client is None and pickle.loads(pickle.dumps(shipped)).sep == io.sep
    assert InputOptions().for_workers() == InputOptions()


@pytest.mark.parametrize("old, new", [("GridSpec", GridOptions), ("ReadOptions", InputOptions)])
def test_the_earlier_names_warn(old, new):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert getattr(records, old) is new
    assert any(issubclass(w.category, DeprecationWarning) and "0.5" in str(w.message) for w in caught)


def test_the_decimal_mark_is_a_point_or_a_comma_and_not_the_separator() -> None:
    from dpopt.records import InputOptions

    assert InputOptions(sep=";", decimal=",").decimal == ","
    with pytest.raises(DpoptInputError, match="`decimal` must be one of"):
        InputOptions(decimal=";")
    with pytest.raises(DpoptInputError, match="`decimal` \\(CLI --decimal\\) must differ from `sep`"):
        InputOptions(decimal=",")
