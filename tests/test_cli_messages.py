"""Messages a new user found untrue or unhelpful (the walkthrough of the CLI)."""

from __future__ import annotations

import pytest

import toy_experiment as toy
from corrpriors.cli import main
from corrpriors.experiments import _gym_time
from corrpriors.experiments._gym import check_methods
from corrpriors.runner import registry as _registry
from corrpriors.runner import run_experiment
from corrpriors.runner._run import ModelEstimate, RunEstimate, duration


@pytest.fixture
def factor(monkeypatch):
    """A machine factor of 0.3 (the probe not run)."""
    monkeypatch.setenv(_gym_time.MACHINE_FACTOR_ENV, "0.3")
    _gym_time.machine_factor.cache_clear()
    yield 0.3
    _gym_time.machine_factor.cache_clear()


def test_the_per_method_figures_are_this_machines_like_the_total(factor):
    """FrozenLake 8 x 8: the total said 46 s per seed, the list pg_absolute_sampling 1 min 23 s (unscaled)."""
    raw = _gym_time.psrl_seed_cost(64, 4, 2, ("pg_sampling", "pg_absolute_sampling"), 5000, 50, 50, 10,
                                   revisit=True)
    cost = _gym_time.for_this_machine(raw)
    assert cost.cpu == pytest.approx(factor * raw.cpu)
    part = cost.parts["pg_absolute_sampling"]
    assert f"pg_absolute_sampling {duration(part)};" in cost.model
    assert duration(raw.parts["pg_absolute_sampling"]) not in cost.model
    assert cost.model.endswith("x0.3 for this machine's speed")


def test_the_totals_follow_from_the_per_seed_figures_said():
    prior = " ".join(line.strip() for line in ModelEstimate(5, 2, 46.2, "m; pg 10 s").lines())
    assert prior.startswith("estimate: by the cost model, before any seed, 46 s CPU per seed; 5 seeds on 2 workers")
    assert "about 3 min 51 s CPU (5 x 46 s), 2 min 19 s wall (3 seeds in turn x 46 s)" in prior
    assert prior.endswith("(CPU per seed by the model: m; pg 10 s)")
    measured = " ".join(line.strip() for line in RunEstimate(5, 2, [(36.0, 19.6)], "seed 0").lines())
    assert measured == ("estimate: measured on seed 0, 36 s wall, 20 s CPU per seed; 5 seeds on 2 workers: about "
                        "1 min 48 s wall (3 seeds in turn x 36 s), 1 min 38 s CPU (5 x 20 s)")


def test_a_report_under_a_regular_file_names_it(tmp_path, capsys, toy_registered):
    """``-o afile/x.html``: "afile ... is not a directory", as ``reproduce --out afile`` says; not "File exists"."""
    out = tmp_path / "results"
    run_experiment(toy.NAME, quick=True, jobs=1, out=out, progress=False, plot=False, echo=None)
    afile = tmp_path / "afile"
    afile.write_text("x")
    capsys.readouterr()
    assert main(["report", str(out), "-o", str(afile / "x.html")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"{afile} exists and is not a directory" in err and "File exists" not in err
    assert main(["reproduce", toy.NAME, "--quick", "--out", str(afile), "--no-progress", "--no-plot"]) == 2
    assert f"{afile} is not a directory" in capsys.readouterr().err
    assert afile.read_text() == "x"


def test_no_resume_counts_the_seeds_on_disk_it_replaces(tmp_path, toy_registered):
    said: list[str] = []
    kw = dict(n_seeds=2, jobs=1, out=tmp_path, progress=False, plot=False)
    run_experiment(toy.NAME, echo=said.append, **kw)
    assert "2 seeds: 0 on disk, 2 to run" in "\n".join(said)
    said.clear()
    run_experiment(toy.NAME, resume=False, echo=said.append, **kw)
    assert "2 seeds: 2 on disk (not reused: --no-resume), 2 to run" in "\n".join(said)
    said.clear()
    run_experiment(toy.NAME, echo=said.append, **kw)
    assert "2 seeds: 2 on disk, 0 to run" in "\n".join(said)


def test_every_unknown_method_is_named_with_a_hint(tmp_path, capsys):
    """``--methods pg,foo`` named only 'pg' and no variant of it."""
    assert main(["psrl", "FrozenLake-v1", "--quick", "--methods", "pg,foo", "--out", str(tmp_path),
                 "--no-progress", "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "unknown 'pg' (did you mean pg_sampling or pg_mean?), 'foo';" in err
    assert main(["reproduce", "psrl-grid", "--quick", "--set", "methods=pg_absolute,dirichlet_sparse",
                 "--out", str(tmp_path), "--no-progress", "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert "'pg_absolute' (did you mean pg_absolute_sampling or pg_absolute_mean?)" in err
    assert "'dirichlet_sparse' (did you mean dirichlet_sparse_sampling or dirichlet_sparse_mean?)" in err
    with pytest.raises(ValueError, match=r"unknown 'pg_sampl' \(did you mean pg_sampling\?\), 'bar'; expected"):
        check_methods(("pg_sampl", "bar"), ("pg_sampling", "pg_mean"))


def test_an_unknown_experiment_gets_the_close_names_and_the_gym_commands(capsys):
    assert main(["reproduce", "sysid"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert ("unknown experiment 'sysid' (did you mean system-id or the command corrpriors sysid ENV_ID, "
            "for a Gymnasium environment?); expected one of system-id") in err
    assert main(["reproduce", "psrl"]) == 2
    assert "the command corrpriors psrl ENV_ID" in capsys.readouterr().err
    assert main(["reproduce", "system_id"]) == 2
    assert "(did you mean system-id?)" in capsys.readouterr().err
    assert main(["reproduce", "zzz"]) == 2
    assert "unknown experiment 'zzz'; expected one of" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"unknown experiment 'sysid' \(did you mean system-id"):
        _registry.get_experiment("sysid")
