"""headgeom.runs.cell.seeded_cells and check_known: the one cell list of the experiments and its entry check."""
from __future__ import annotations

import pytest

from headgeom.runs.cell import check_known, seeded_cells


def test_every_setting_times_every_seed_with_the_seed_last():
    settings = [{"run": "a", "lr": 0.1}, {"run": "b", "lr": 0.5}]
    cells = seeded_cells("X", settings, 2, default=5)
    assert cells == [{"run": "a", "lr": 0.1, "seed": 0}, {"run": "a", "lr": 0.1, "seed": 1},
                     {"run": "b", "lr": 0.5, "seed": 0}, {"run": "b", "lr": 0.5, "seed": 1}]
    assert [list(c) for c in cells] == [["run", "lr", "seed"]] * 4  # the order cell keys are written in
    assert settings == [{"run": "a", "lr": 0.1}, {"run": "b", "lr": 0.5}]  # the settings are not changed


def test_the_config_seeds_when_none_are_given_and_seed_major_order():
    assert seeded_cells("X", [{}], None, default=3) == [{"seed": 0}, {"seed": 1}, {"seed": 2}]
    assert seeded_cells("X", ({"d": d} for d in (1, 2)), None, default=2, seed_major=True) == [
        {"d": 1, "seed": 0}, {"d": 2, "seed": 0}, {"d": 1, "seed": 1}, {"d": 2, "seed": 1}]


@pytest.mark.parametrize("seeds, default", [(0, 3), (-1, 3), (None, 0), (True, 3), (2.0, 3)])
def test_a_seed_count_below_one_or_not_a_whole_number_is_refused(seeds, default):
    with pytest.raises(ValueError, match=r"the grid needs at least one seed; got .*--seeds N"):
        seeded_cells("the grid", [{"run": "a"}], seeds, default=default)


def test_check_known_names_the_field_the_unknown_entries_and_the_choices():
    check_known("C8 config runs", ["a", "b", "a"], {"a": 1, "b": 2})
    with pytest.raises(ValueError) as err:
        check_known("C8 config runs", ["a", "z", "y"], {"a": 1, "b": 2})
    assert str(err.value) == "C8 config runs has unknown entries ['z', 'y']; choose from ('a', 'b')"
