"""``--out`` holds this run's outputs only (issue 22, item 6 and finding 7), with a manifest;
``fit --help`` lists every output file apart from its description (finding 9). Replacing
another configuration's results takes ``--overwrite`` (audit M5, tests/test_fit_overwrite.py):
the runs here that change the configuration pass it."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re

import numpy as np
import pytest

from corrpriors import _fileio
from corrpriors.cli import build_parser, main
from corrpriors.data import load_example
from corrpriors.runner.fit import OUTPUTS


@pytest.fixture
def files(tmp_path):
    counts, coords, _ = load_example()
    paths = {"counts": tmp_path / "c.csv", "coords": tmp_path / "x.csv",
             "new": tmp_path / "new.csv"}
    np.savetxt(paths["counts"], counts, delimiter=",", fmt="%d")
    np.savetxt(paths["coords"], coords, delimiter=",")
    np.savetxt(paths["new"], [[0.5, 0.5], [2.5, 3.5]], delimiter=",")
    return paths


def fit(files, out, *extra):
    return main(["fit", "--counts", str(files["counts"]), "--coords", str(files["coords"]),
                 "--out", str(out), "--quiet", *map(str, extra)])


def check_manifest(out):
    """Every file the manifest lists is in --out with its size and digest, and every output
    name in --out is listed (or is the manifest)."""
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["command"] == "corrpriors fit"
    for name, entry in manifest["files"].items():
        data = (out / name).read_bytes()
        assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    present = {name for name in OUTPUTS if os.path.lexists(out / name)}
    assert present == set(manifest["files"]) | {"manifest.json"}
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["outputs"]) == present
    return manifest


def test_second_fit_without_predict_at_removes_the_first_runs_predictions(tmp_path, files,
                                                                           capsys):
    """Issue 22 finding 7: the first run's predictions.csv (with _sd columns) stayed next to
    the second run's probs.csv (another configuration: with --overwrite since audit M5)."""
    out = tmp_path / "out"
    assert fit(files, out, "--predict-at", files["new"], "--uncertainty") == 0
    assert (out / "predictions.csv").exists()
    assert "p1_sd" in (out / "predictions.csv").read_text()
    check_manifest(out)
    (out / "notes.txt").write_text("mine")  # not an output name: never touched
    assert main(["fit", "--counts", str(files["counts"]), "--coords", str(files["coords"]),
                 "--out", str(out), "--overwrite"]) == 0
    said = capsys.readouterr().out
    assert not os.path.lexists(out / "predictions.csv")
    assert "removed predictions.csv of an earlier run" in said
    assert (out / "notes.txt").read_text() == "mine"
    header = next(csv.reader(open(out / "probs.csv")))
    assert not any(h.endswith("_sd") for h in header)
    manifest = check_manifest(out)
    assert set(manifest["files"]) == {"probs.csv", "psi.npz", "summary.json"}
    assert not [p for p in os.listdir(out) if p.startswith(".")]  # nothing hidden left


def test_inputs_in_out_are_never_removed(tmp_path, files):
    """Inputs kept in --out under their own names stay; an input under an output name is
    refused before anything runs (as before)."""
    out = tmp_path / "out"
    out.mkdir()
    counts = out / "counts.csv"
    counts.write_bytes(files["counts"].read_bytes())
    assert main(["fit", "--counts", str(counts), "--coords", str(files["coords"]),
                 "--predict-at", str(files["new"]), "--out", str(out), "--quiet"]) == 0
    assert main(["fit", "--counts", str(counts), "--coords", str(files["coords"]),
                 "--out", str(out), "--quiet", "--overwrite"]) == 0
    assert counts.read_bytes() == files["counts"].read_bytes()
    before = (out / "probs.csv").read_bytes()
    stale_input = out / "predictions.csv"
    stale_input.write_bytes(files["new"].read_bytes())
    assert main(["fit", "--counts", str(counts), "--coords", str(files["coords"]),
                 "--predict-at", str(stale_input), "--out", str(out), "--quiet",
                 "--overwrite"]) == 2  # --overwrite never covers an input
    assert stale_input.read_bytes() == files["new"].read_bytes()
    assert (out / "probs.csv").read_bytes() == before


def test_a_stale_link_is_removed_not_its_target(tmp_path, files):
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "elsewhere.csv"
    target.write_text("keep me\n")
    os.symlink(target, out / "predictions.csv")
    assert fit(files, out) == 2  # not written by corrpriors fit (audit M5)
    assert fit(files, out, "--overwrite") == 0
    assert not os.path.lexists(out / "predictions.csv")
    assert target.read_text() == "keep me\n"


def test_failed_write_keeps_the_stale_file_and_the_old_outputs(tmp_path, files, monkeypatch,
                                                                capsys):
    out = tmp_path / "out"
    assert fit(files, out, "--predict-at", files["new"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = os.replace

    def failing(src, dst, *a, **k):  # the move aside of the stale file fails
        if str(src).endswith("predictions.csv"):
            raise OSError(28, "No space left on device")
        return real(src, dst, *a, **k)

    monkeypatch.setattr(_fileio.os, "replace", failing)
    assert fit(files, out, "--learn-scale", "--overwrite") == 1
    monkeypatch.setattr(_fileio.os, "replace", real)
    assert "nothing was written" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_atomic_write_many_removes_and_restores(tmp_path, monkeypatch):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    a.write_text("old a")
    c.write_text("old c")
    _fileio.atomic_write_many({a: b"new a", b: b"new b"}, remove=[c, tmp_path / "missing"])
    assert a.read_text() == "new a" and b.read_text() == "new b" and not c.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
    c.write_text("old c")
    d = tmp_path / "d"
    d.write_text("old d")
    real = os.replace

    def failing(src, dst, *args, **kwargs):
        if str(src) == str(d):
            raise OSError(5, "I/O error")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(_fileio.os, "replace", failing)
    with pytest.raises(OSError):
        _fileio.atomic_write_many({a: b"newer a"}, remove=[c, d])
    monkeypatch.setattr(_fileio.os, "replace", real)
    assert a.read_text() == "new a" and c.read_text() == "old c" and d.read_text() == "old d"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c", "d"]
    with pytest.raises(ValueError, match="remove"):
        _fileio.atomic_write_many({a: b"x"}, remove=[a])


def test_help_separates_every_output_name_from_its_description():
    """Issue 22 finding 9: the help ended with 'predictions.csvwith'."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    text = sub.choices["fit"].format_help()
    for name in OUTPUTS:
        assert re.search(rf"^  {re.escape(name)}  +\S", text, re.MULTILINE), name
    assert "csvwith" not in text
