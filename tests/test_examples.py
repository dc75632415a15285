"""The Gymnasium worked example runs end to end (slow: real PSRL runs)."""

import pathlib
import runpy

import pytest

EXAMPLE = (pathlib.Path(__file__).resolve().parents[1] / "examples" / "decision_making"
           / "plot_psrl_gymnasium.py")


@pytest.mark.slow
def test_psrl_gymnasium_example_runs(capsys):
    import matplotlib

    matplotlib.use("Agg")
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert "normalized return after 1000 steps" in out and "corridor: goal reached" in out
