"""``corrpriors fit`` never replaces another configuration's results, nor files it did not write,
without ``--overwrite`` (audit M5): ``fit --out r1`` then ``fit --out r1 --learn-scale --scale 3``
replaced all four files without a word, a folder's own ``probs.csv``/``summary.json`` (no
``manifest.json``) were overwritten too, and ``--out ''`` wrote into the current directory.

Each refusal comes before fitting, is one line naming ``--out`` with exit status 2 and leaves
every file as it was; a re-run of the same configuration replaces its own results.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from corrpriors.cli import main
from corrpriors.data import load_example
from corrpriors.runner import fit as runner
from corrpriors.runner.fit import FitOptions, UsageError, fit_files


def fit(capsys, *args):
    try:
        rc = main(["fit", "--quiet", *map(str, args)])
    except SystemExit as exc:  # argparse errors
        rc = exc.code
    captured = capsys.readouterr()
    return rc, captured.err


def snapshot(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def refused(rc, err, *needles):
    assert rc == 2, err
    assert err.count("\n") == 1 and "--out" in err and "Traceback" not in err, err
    for n in needles:
        assert str(n) in err, (n, err)


@pytest.fixture
def no_fit(monkeypatch):
    """Make any fit fail the test: the refusals must come before fitting."""
    from corrpriors.core.model import CorrelatedMultinomial

    def refuse(*args, **kwargs):
        raise AssertionError("the model was fitted before the check")

    monkeypatch.setattr(CorrelatedMultinomial, "fit", refuse)


@pytest.fixture
def first_run(tmp_path, capsys):
    out = tmp_path / "r1"
    assert fit(capsys, "--out", out)[0] == 0
    return out


def test_a_rerun_of_the_same_configuration_replaces_its_results(first_run, capsys):
    manifest = json.loads((first_run / "manifest.json").read_text())
    assert manifest["configuration"]["options"]["scale"] == 1.0
    assert manifest["configuration"]["inputs"]["counts"].endswith("counts.csv")
    (first_run / "notes.txt").write_text("mine")
    before = snapshot(first_run)
    assert fit(capsys, "--out", first_run)[0] == 0
    after = snapshot(first_run)
    assert set(after) == set(before) and after["notes.txt"] == b"mine"
    assert after["probs.csv"] == before["probs.csv"]  # same numbers, written again


def test_another_configuration_is_refused_before_fitting(first_run, capsys, monkeypatch):
    """The audit's reproducer: --learn-scale --scale 3 into the folder of a scale-1 run."""
    before = snapshot(first_run)
    with monkeypatch.context() as m:
        from corrpriors.core.model import CorrelatedMultinomial

        m.setattr(CorrelatedMultinomial, "fit", lambda *a, **k: pytest.fail("fitted"))
        rc, err = fit(capsys, "--out", first_run, "--learn-scale", "--scale", 3)
    refused(rc, err, f"corrpriors fit: error: --out: {first_run} holds the results of another "
                     f"configuration (--scale 1.0 -> 3.0, --learn-scale false -> true); choose "
                     f"another --out, or pass --overwrite to replace them")
    assert snapshot(first_run) == before
    rc, err = fit(capsys, "--out", first_run, "--learn-scale", "--scale", 3, "--overwrite")
    assert rc == 0, err
    manifest = json.loads((first_run / "manifest.json").read_text())
    assert manifest["configuration"]["options"]["scale"] == 3.0
    assert snapshot(first_run)["probs.csv"] != before["probs.csv"]


def test_other_inputs_are_another_configuration(first_run, tmp_path, capsys, no_fit):
    counts, coords, _ = load_example()
    np.savetxt(tmp_path / "c.csv", counts, delimiter=",", fmt="%d")
    np.savetxt(tmp_path / "x.csv", coords, delimiter=",")
    rc, err = fit(capsys, "--counts", tmp_path / "c.csv", "--coords", tmp_path / "x.csv",
                  "--out", first_run)
    refused(rc, err, "another configuration (--counts ", f'-> "{tmp_path / "c.csv"}"')


@pytest.mark.parametrize("names", [("probs.csv", "summary.json"), ("psi.npz",),
                                   ("manifest.json",)])
def test_files_not_written_by_corrpriors_are_refused(tmp_path, capsys, no_fit, names):
    """A plain folder whose own results carry output names (no manifest.json, or a
    manifest.json that is not one of corrpriors fit)."""
    out = tmp_path / "plain"
    out.mkdir()
    for name in names:
        (out / name).write_text("mine\n")
    (out / "data.csv").write_text("1,2\n")
    before = snapshot(out)
    rc, err = fit(capsys, "--out", out)
    why = ("its manifest.json is not one of corrpriors fit" if names == ("manifest.json",)
           else "no manifest.json")
    refused(rc, err, f"--out: {out} holds {', '.join(names)}, which corrpriors fit did not "
                     f"write ({why})")
    assert snapshot(out) == before


def test_overwrite_replaces_foreign_output_files_and_nothing_else(tmp_path, capsys):
    out = tmp_path / "plain"
    out.mkdir()
    (out / "probs.csv").write_text("mine\n")
    (out / "predictions.csv").write_text("mine too\n")
    (out / "data.csv").write_text("1,2\n")
    assert fit(capsys, "--out", out, "--overwrite")[0] == 0
    assert sorted(p.name for p in out.iterdir()) == ["data.csv", "manifest.json", "probs.csv",
                                                     "psi.npz", "summary.json"]
    assert (out / "data.csv").read_text() == "1,2\n"


@pytest.mark.parametrize("change", ["edited", "added", "symlink"])
def test_results_changed_since_the_run_are_refused(first_run, tmp_path, capsys, no_fit, change):
    if change == "edited":
        name = "probs.csv"
        with open(first_run / name, "a") as fh:
            fh.write("# my note\n")
    elif change == "added":
        name = "predictions.csv"
        (first_run / name).write_text("row,p1\n")
    else:
        name = "psi.npz"
        (tmp_path / "elsewhere.npz").write_bytes((first_run / name).read_bytes())
        (first_run / name).unlink()
        (first_run / name).symlink_to(tmp_path / "elsewhere.npz")
    before = snapshot(first_run)
    rc, err = fit(capsys, "--out", first_run)
    refused(rc, err, f"--out: {first_run} holds {name}, changed or added since corrpriors fit "
                     f"wrote it")
    assert snapshot(first_run) == before


def test_results_of_a_version_without_a_recorded_configuration(first_run, capsys, no_fit):
    path = first_run / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["configuration"]
    path.write_text(json.dumps(manifest))
    rc, err = fit(capsys, "--out", first_run)
    refused(rc, err, "an earlier corrpriors fit that did not record its configuration")


def test_an_empty_out_is_refused(tmp_path, capsys, monkeypatch, no_fit):
    monkeypatch.chdir(tmp_path)
    for empty in ("", " "):
        rc, err = fit(capsys, "--out", empty)
        refused(rc, err, "argument --out: expected a directory name")
        with pytest.raises(UsageError, match="--out: expected a directory, got an empty name"):
            fit_files(FitOptions(out=empty))  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_a_run_that_wrote_meanwhile_is_not_replaced(tmp_path, capsys, monkeypatch):
    """--out is checked again just before writing: results that another process put there
    during the fit are left alone (exit 2, nothing written)."""
    out = tmp_path / "o"
    real = runner._fit

    def fit_while_another_writes(args, data):
        result = real(args, data)
        out.mkdir()
        (out / "summary.json").write_text("{}\n")
        return result

    monkeypatch.setattr(runner, "_fit", fit_while_another_writes)
    rc, err = fit(capsys, "--out", out)
    refused(rc, err, f"--out: {out} holds summary.json, which corrpriors fit did not write")
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]


def test_help_names_the_flag_and_the_rule(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--overwrite" in text and "A re-run of the same configuration replaces them" in text
