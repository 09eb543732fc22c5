"""The lattice's int64 capacity is checked from public numbers only (k, c, U, the
granularity), before any record is read: a file that does not exist is never opened."""

import pytest

from dpopt import DpoptInputError
from dpopt.privacy.options import Budget, NoiseOptions
from dpopt.privacy.user import UserOptions
from dpopt.release import release


def test_too_fine_a_lattice_is_refused_before_reading():
    with pytest.raises(DpoptInputError, match="granularity_bits") as err:
        release("/nonexistent/records.csv", bound=1e9, budget=Budget(epsilon_total=1.0, delta=1e-6),
                model=UserOptions(strategy="adaptive", bounds=(1, 64)), noise=NoiseOptions(granularity_bits=12))
    assert "records" not in str(err.value).split(":")[0]  # about the lattice, not the file
