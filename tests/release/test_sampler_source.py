"""A caller-supplied real-release sampler must carry the integer source every random choice of the
release draws from: without one it would be silently treated as a simulation and the tie-break keys
would come from numpy."""

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.noise import integer_source
from dpopt.privacy.options import NoiseOptions
from dpopt.privacy.user import _samplers
from dpopt.privacy.user.mechanism import DiscreteLaplace


class _NoSource:
    unit = "epsilon"
    real_release = True
    label = "a real sampler without a source"

    def integer(self, values, *, l1, l2, budget):  # pragma: no cover - never reached
        return np.asarray(values, dtype=float)


def test_real_sampler_without_source_is_refused():
    with pytest.raises(DpoptInputError, match="real_release but has no integer `source`"):
        _samplers(NoiseOptions(), "laplace", _NoSource())


def test_real_sampler_with_source_is_used_without_numpy():
    mech = DiscreteLaplace(integer_source(None))
    got, sel, rng = _samplers(NoiseOptions(), "laplace", mech)
    assert got is mech and sel is mech and rng is None
