"""The worked examples run end to end (slow: they are real PSRL runs)."""

import pathlib
import runpy

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.slow
def test_psrl_gymnasium_example_runs(capsys):
    runpy.run_path(str(EXAMPLES / "psrl_gymnasium.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "normalized return" in out and "corridor: goal reached" in out
