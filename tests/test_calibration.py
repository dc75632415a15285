"""The calibration harness of issue 24 (``benchmarks/calibration.py``), run small.

The harness is right if the exact sampler passes it: Gibbs's rank histograms are uniform and its
coverage nominal; it has power if it flags the mean-field VI, whose 90 % intervals are known to
under-cover when the prior scale is large. The calibrated default must pass like Gibbs.
"""

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _harness():
    spec = importlib.util.spec_from_file_location("calibration",
                                                  ROOT / "benchmarks" / "calibration.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("calibration", module)  # dataclasses look their module up
    spec.loader.exec_module(sys.modules["calibration"])
    return sys.modules["calibration"]


def test_rank_uniformity_test_has_its_size_and_power():
    cal = _harness()
    rng = np.random.default_rng(0)
    uniform = [cal.rank_uniformity(rng.multinomial(50, np.full(10, 0.1), size=100))[1]
               for _ in range(200)]
    assert 0.02 < np.mean(np.array(uniform) < 0.05) < 0.1  # about its nominal size
    u_shaped = np.r_[0.12, np.full(8, 0.095), 0.12]
    power = [cal.rank_uniformity(rng.multinomial(50, u_shaped, size=100))[1] for _ in range(50)]
    assert np.mean(np.array(power) < 0.05) > 0.8


def test_cluster_rate_standard_error():
    cal = _harness()
    p, se = cal._cluster_rate([5, 5, 5, 5], [10, 10, 10, 10])
    assert p == 0.5 and se == 0.0
    p, se = cal._cluster_rate([10, 0], [10, 10])  # two clusters, all or nothing
    assert p == 0.5 and se == pytest.approx(0.5 / np.sqrt(2))


@pytest.mark.slow
def test_harness_passes_gibbs_flags_vi_and_passes_the_default():
    cal = _harness()
    problem = cal.Problem(side=6, n_categories=3, regimes=(0, 1, 5, 50))
    out = cal.calibrate(problem, [4.0], ["calibrated", "vi", "gibbs"], reps=60, seed=11)
    rows = out["summary"]["4.0"]["methods"]
    for n in problem.regimes:
        for method in ("gibbs", "calibrated"):
            assert rows[method][f"ranks_N{n}"][1] > 1e-3, (method, n)
            for level in (50, 90):
                p, se = rows[method][f"cover{level}_N{n}"]
                assert abs(p - level / 100) < max(0.035, 3 * se), (method, n, level, p, se)
    vi90 = rows["vi"]["cover90_N50"][0]
    assert vi90 < 0.875 and vi90 < rows["gibbs"]["cover90_N50"][0] - 0.02
    assert min(rows["vi"][f"ranks_N{n}"][1] for n in (5, 50)) < 0.01  # U-shaped ranks
