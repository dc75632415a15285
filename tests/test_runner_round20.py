"""Round-20 audit of ``corrpriors reproduce``: settings refused up front (a scale lattice longer
than the search takes; numbers not in ASCII digits), ``--out`` that is empty or inside another
run folder, and every plan's folder checked before the first experiment of ``reproduce all`` runs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from corrpriors.core.model import CorrelatedMultinomial
from corrpriors.core.selection import MAX_LATTICE_POINTS, ScaleSearch
from corrpriors.runner._run import plan_run

pytestmark = pytest.mark.usefixtures("toy_registered")   # (conftest)


def _points(low, high, step):
    """Lattice points 10^(j step) in [low, high], counted directly (the independent check)."""
    return math.floor(math.log10(high) / step + 1e-9) - math.ceil(math.log10(low) / step - 1e-9) + 1


# ----------------------------------------------------------------------------- 1. the scale lattice


@pytest.mark.parametrize("overrides", [{"scale_step": "1e-5"}, {"scale_step": "1e-4"},
                                       {"scale_range": "1e-300,1e12", "scale_step": "0.01"}])
def test_system_id_refuses_a_lattice_longer_than_the_search_takes_when_planning(overrides):
    """scale_step=1e-5 (600,001 points) started the workers and failed inside every seed with
    ScaleSearch's 'step: ...' (exit 1, a run folder with error.log); now plan_run refuses it,
    naming the settings."""
    lo, hi = (float(v) for v in overrides.get("scale_range", "0.01,10000").split(","))
    assert _points(lo, hi, float(overrides["scale_step"])) > MAX_LATTICE_POINTS
    with pytest.raises(ValueError, match=r"^scale_step, scale_range: expected at most 10,000 lattice "
                                         r"points between the ends of scale_range") as info:
        plan_run("system-id", quick=True, overrides=overrides)
    assert "inf" not in str(info.value)


def test_system_id_takes_the_longest_lattice_the_search_takes():
    step = 6 / (MAX_LATTICE_POINTS - 1)   # the default range, 6 decades: exactly 10,000 points
    assert _points(0.01, 1e4, step) == MAX_LATTICE_POINTS
    plan = plan_run("system-id", quick=True, overrides={"scale_step": repr(step)})
    ScaleSearch(CorrelatedMultinomial(np.eye(3)), low=0.01, high=1e4, step=plan.config.scale_step)


def test_transfer_refuses_a_lattice_longer_than_the_search_takes_when_planning():
    assert _points(0.01, 1e4, 1e-4) > MAX_LATTICE_POINTS
    with pytest.raises(ValueError, match=r"^scale_step: expected at most 10,000 lattice points between "
                                         r"the models' scale range \[0.01, 10000\] \(6 decades\), got "
                                         r"60,001 with scale_step 0.0001"):
        plan_run("transfer", quick=True, overrides={"scale_step": "1e-4"})
    plan_run("transfer", quick=True, overrides={"scale_step": "0.001"})   # 6,001 points


def test_a_range_wider_than_a_float_ratio_is_counted_in_log_space():
    """high / low = 1e312 overflowed: the 625-point lattice of [1e-300, 1e12] at step 0.5 was
    refused as 'inf' points; a step of 1e-320 said 'got inf'."""
    search = ScaleSearch(CorrelatedMultinomial(np.eye(3)), low=1e-300, high=1e12, step=0.5)
    assert search.j_max - search.j_min + 1 == _points(1e-300, 1e12, 0.5) == 625
    with pytest.raises(ValueError, match=r"^step: expected at most 10,000 lattice points") as info:
        ScaleSearch(CorrelatedMultinomial(np.eye(3)), low=1e-300, high=1e12, step=1e-320)
    assert "inf" not in str(info.value) and "more than 1.8e+308" in str(info.value)
