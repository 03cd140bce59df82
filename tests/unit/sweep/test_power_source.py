"""Which power source a run's energy figures come from, by the roles the collectors declare and the
documented precedence (board input first; NVML's counter before its gauge, plus the CPU package)."""

from __future__ import annotations

import pytest

from edgeprof.sweep import choose_power_source

pytestmark = pytest.mark.timeout(60)


def test_choose_power_source_follows_the_documented_precedence() -> None:
    # board input rail first, whatever else exists
    src = choose_power_source({"power.vdd_cpu_mw", "power.vdd_in_mw", "energy.package_uj"})
    assert src is not None
    assert (src.name, src.basis, src.whole_board) == ("power.vdd_in_mw", "board_input", True)
    # NVML's counter beats its own gauge, and the CPU package is added to it
    src = choose_power_source({"gpu0.power_mw", "gpu0.energy_mj", "energy.package_uj"})
    assert src is not None and (src.name, src.basis) == ("gpu0.energy_mj+energy.package_uj", "gpu+cpu")
    src = choose_power_source({"gpu0.power_mw", "gpu0.energy_mj"})
    assert src is not None and src.metrics == ["gpu0.energy_mj"] and src.basis == "gpu"
    assert choose_power_source({"temp.cpu_c"}) is None
