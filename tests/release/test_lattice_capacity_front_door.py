"""Options checked from public numbers only, before any record is read (a file that does not exist
is never opened): the lattice's int64 capacity (k, c, U, the granularity), the map level against the
finest resolution."""

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


@pytest.mark.parametrize("strategy", ["optimised", "place"])
def test_a_map_level_at_the_finest_resolution_is_refused_before_reading(strategy):
    """The engine's map and the place release's top level must lie above the listed cells; at the
    finest resolution itself this was refused only once the records had been read."""
    from dpopt.privacy.options import GridOptions

    with pytest.raises(DpoptInputError, match=r"^`coarsest_resolution` must be below `h3_resolution` = 7 .* got 7$"):
        release("/nonexistent/records.csv", bound=10.0, budget=Budget(epsilon_total=1.0), grid=GridOptions(7, "1h"),
                model=UserOptions(partitions="p.csv", coarsest_resolution=7, strategy=strategy))
