"""The release paths around the exact samplers (issue 24.3): what a release adds to the draws.

``dpopt.userdp.mechanism._add_exact`` (the `user` model's v + Z) is vectorised for int64 inputs;
it must give the float of the exact integer sum, as the Python-int path does, at every size.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpopt import DpoptInputError
from dpopt.userdp import mechanism as udp


def _python(values, noise) -> list[float]:
    return [float(int(v) + int(z)) for v, z in zip(np.asarray(values).ravel().tolist(), list(noise))]


def test_add_exact_vectorised_equals_python_ints():
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.integers(-2**40, 2**40, 2000), 2**53 + np.arange(-8, 8), -(2**53) + np.arange(16),
                        np.array([2**62 - 1, -(2**62) + 1, 2**61 + 3])])
    z = rng.integers(-2**20, 2**20, v.size)
    z[-3:] = [0, 0, 2**60 + 1]
    out = udp._add_exact(v, z)
    assert out.tolist() == _python(v, z)  # ties at 2^53 round to even as float(int) does
    w = (v[:2000] * 1.0).reshape(40, 50)  # whole floats, 2-d
    np.testing.assert_array_equal(udp._add_exact(w, z[:2000]), np.array(_python(w, z[:2000])).reshape(40, 50))


def test_add_exact_beyond_int64_and_bad_input():
    big = np.array([2**62, 5], dtype=np.int64)
    z = np.array([2**62, 1], dtype=np.int64)
    assert udp._add_exact(big, z).tolist() == [float(2**63), 6.0]  # Python ints: no int64 overflow
    obj = np.array([2**70, -3], dtype=object)
    assert udp._add_exact(obj, np.array([1, 1], dtype=np.int64)).tolist() == [float(2**70 + 1), -2.0]
    assert udp._add_exact(np.array([1, 2]), iter([3, 2**80])).tolist() == [4.0, float(2**80 + 2)]
    with pytest.raises(DpoptInputError, match="values"):
        udp._add_exact(np.array([0.5, 1.0]), np.array([1, 1], dtype=np.int64))
    assert udp._add_exact(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)).shape == (0,)
