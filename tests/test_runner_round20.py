"""Round-20 audit of ``corrpriors reproduce``: settings refused up front (a scale lattice longer
than the search takes; numbers not in ASCII digits), ``--out`` that is empty or inside another
run folder, and every plan's folder checked before the first experiment of ``reproduce all`` runs.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

import toy_experiment as toy
from corrpriors.cli import main
from corrpriors.core.model import CorrelatedMultinomial
from corrpriors.core.selection import MAX_LATTICE_POINTS, ScaleSearch
from corrpriors.runner import OutputError, _config, _io
from corrpriors.runner._run import parse_seeds, plan_run, run_experiment
from corrpriors.runner._session import ExecutionOptions, execute_plans

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


# ----------------------------------------------------------------------------- 2. ASCII digits


@pytest.mark.parametrize("key, value", [("n_points", "٣"), ("n_points", "１"), ("n_points", "1_0"),
                                        ("noise", "١"), ("noise", "０.５"), ("noise", "0_5"),
                                        ("grid", "1,٢"), ("grid", "1,2_0")])
def test_set_refuses_numbers_not_written_in_ascii_digits(key, value):
    """int() and float() read '٣', '１' and '1_0': --set n_points=٣ ran as 3."""
    with pytest.raises(ValueError, match=r"expected (an integer|a number) written in ASCII digits, got"):
        _config.apply_overrides(toy, toy.Config(), {key: value})


@pytest.mark.parametrize("key, value, expected", [("n_points", "3", 3), ("n_points", "+4", 4),
                                                  ("noise", "1e-3", 1e-3), ("noise", ".5", 0.5),
                                                  ("noise", "-2.", -2.0), ("grid", "1,-2", (1, -2))])
def test_set_still_reads_ascii_numbers(key, value, expected):
    config, _ = _config.apply_overrides(toy, toy.Config(), {key: value})
    assert getattr(config, key) == expected


def test_the_old_messages_for_non_numbers_stay():
    for value, message in (("abc", "expected a number, got 'abc'"), ("inf", "expected a finite number"),
                           ("1e400", "expected a finite number")):
        with pytest.raises(ValueError, match=re.escape(message)):
            _config.apply_overrides(toy, toy.Config(), {"noise": value})
    with pytest.raises(ValueError, match=re.escape("expected an integer, got 'x'")):
        _config.apply_overrides(toy, toy.Config(), {"n_points": "x"})


@pytest.mark.parametrize("text", ["١", "0-٣", "1_0", "0,1_1"])
def test_seeds_refuse_digits_of_other_scripts(text):
    with pytest.raises(ValueError, match=r"^seeds: expected comma-separated non-negative integers \(ASCII"):
        parse_seeds(text)
    assert parse_seeds("0-2,10") == [0, 1, 2, 10]


@pytest.mark.parametrize("option", ["--n-seeds", "--jobs"])
@pytest.mark.parametrize("value", ["٢", "1_0"])
def test_integer_options_refuse_digits_of_other_scripts(capsys, tmp_path, option, value):
    with pytest.raises(SystemExit) as info:
        main(["reproduce", toy.NAME, "--out", str(tmp_path), option, value])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert f"argument {option}" in err and f"expected an integer written in ASCII digits, got {value!r}" in err
    assert not list(tmp_path.iterdir())


def test_number_from_text_agrees_with_python_on_ascii_text():
    from corrpriors.runner._ranges import number_from_text

    for text in ("0", "-7", "+12", "9223372036854775807"):
        assert number_from_text(text, int) == int(text)
    for text in ("0", "1.", ".5", "-2.5e-3", "+1E2"):
        assert number_from_text(text, float) == float(text)
    for text, kind in (("٣", int), (" 3", int), ("3.0", int), ("１.５", float), ("nan", float)):
        with pytest.raises(ValueError):
            number_from_text(text, kind)


# ----------------------------------------------------------------------------- 3, 4. --out


@pytest.mark.parametrize("out", ["", "  "])
def test_an_empty_out_is_refused_like_fit_does(capsys, tmp_path, monkeypatch, out):
    """reproduce --out '' wrote into the current directory; fit refused it."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["reproduce", toy.NAME, "--out", out, "--no-progress", "--no-plot"])
    assert info.value.code == 2
    assert "argument --out: expected a directory name" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def _quiet(**kw):
    return run_experiment(toy.NAME, jobs=1, progress=False, echo=None, plot=False, **kw)


def test_out_inside_another_run_folder_is_refused(tmp_path, capsys):
    """--out r1/system-id/quick-<hash> nested a new run inside that run's folder."""
    first = _quiet(quick=True, out=tmp_path / "r1")
    before = sorted(p.name for p in first.out_dir.iterdir())
    for out, where in ((first.out_dir, "is the run folder"), (first.out_dir / "sub" / "deeper", "lies inside")):
        with pytest.raises(OutputError, match=rf"{where} .*{re.escape(first.out_dir.name)}, which holds another"):
            _quiet(out=out)
        code = main(["reproduce", toy.NAME, "--out", str(out), "--no-progress", "--no-plot", "--jobs", "1"])
        err = capsys.readouterr().err
        assert code == 2 and where in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in first.out_dir.iterdir()) == before   # nothing created in it


def test_out_under_a_folder_with_another_programs_config_json_is_taken(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"name": "not a run"}))
    assert not _io.is_run_folder(tmp_path)
    assert _quiet(quick=True, out=tmp_path / "r").computed_seeds == (0, 1)


# ----------------------------------------------------------------------------- 5. every plan checked first


def test_reproduce_all_checks_every_folder_before_the_first_experiment_runs(tmp_path, capsys):
    """A later plan's folder recording another configuration stopped `reproduce all` only after
    the earlier experiments had run."""
    log = tmp_path / "log"
    log.mkdir()
    out = tmp_path / "r"
    first = plan_run(toy.NAME, quick=True, overrides={"log_dir": str(log)}, out=out)
    second = plan_run(toy.NAME, overrides={"log_dir": str(log)}, out=out)
    assert first.run_dir != second.run_dir
    _io.prepare_run_dir(second.run_dir)
    record = {"experiment": toy.NAME, "config_hash": second.config_hash,
              "config": dict(second.config_json, n_points=7)}
    (second.run_dir / "config.json").write_text(json.dumps(record))
    options = ExecutionOptions(out=out, jobs=1, progress=False, plot=False)
    assert execute_plans([first, second], options) == 2
    err = capsys.readouterr().err
    assert f"{toy.NAME}: " in err and "records another configuration" in err
    assert not list(log.iterdir())                                 # no seed of the first plan ran
    assert not list((first.run_dir / "seeds").iterdir())
