"""``corrpriors report`` and the run record, round 20 audit: -o into another results folder's run
folder, active content linked from the page, an unbounded page, terminal escapes on stderr,
labels that disagree with the figures, stale figures after ``--no-plot``, plug-in labels over
vocabulary names.
"""

from __future__ import annotations

import json
import os
import pathlib
import types
import xml.etree.ElementTree as ET

import pytest

import toy_experiment as toy
from corrpriors import _methods
from corrpriors.cli import main
from corrpriors.runner import _report_input, _run
from corrpriors.runner import report as report_module
from test_report_safety import PNG, check_tree, make_run, record, render


def _hrefs(tree: ET.Element) -> list[str]:
    return [el.get("href", "") for el in tree.iter("a")]


# ----------------------------------------------------------------------------- item 1: -o


@pytest.mark.parametrize("target", ["metrics.json", "config.json", "warnings.log", "page.html",
                                    "seeds/new.html", "sub/dir/page.html"])
def test_output_inside_a_run_folder_of_another_results_folder_is_refused(tmp_path, capsys, target):
    make_run(tmp_path / "res0", "quick-1", record())
    other = make_run(tmp_path / "res1", "quick-2", record())
    before = {p: p.read_bytes() for p in other.rglob("*") if p.is_file()}
    code = main(["report", str(tmp_path / "res0"), "-o", str(other / target)])
    err = capsys.readouterr().err
    assert code == 2 and "-o " in err and "run folder" in err and len(err.strip().splitlines()) == 1
    assert {p: p.read_bytes() for p in other.rglob("*") if p.is_file()} == before
    assert not (other / target).exists() or target in ("metrics.json", "config.json", "warnings.log")


def test_output_beside_run_folders_and_under_a_foreign_config_json_is_written(tmp_path, capsys):
    make_run(tmp_path / "res0", "quick-1", record())
    make_run(tmp_path / "res1", "quick-2", record())
    (tmp_path / "config.json").write_text('{"editor": "vim"}')   # another program's config.json
    for out in (tmp_path / "res1" / "toy-runner" / "page.html", tmp_path / "pages" / "page.html"):
        assert main(["report", str(tmp_path / "res0"), "-o", str(out)]) == 0
        assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    # but a runner's config.json (an interrupted run, no seeds/ yet) marks a run folder
    run = tmp_path / "res1" / "toy-runner" / "quick-3"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"experiment": "toy-runner", "config_hash": "ab", "config": {}}))
    assert main(["report", str(tmp_path / "res0"), "-o", str(run / "page.html")]) == 2
    assert not (run / "page.html").exists()
    capsys.readouterr()


# ----------------------------------------------------------------------------- item 2: active content


def test_only_png_and_pdf_files_with_their_signature_are_linked(tmp_path, capsys):
    summary = record()
    summary["run"]["figures"] = [{"files": ["toy-error.png", "toy-error.pdf", "evil.svg", "evil.html",
                                            "fake.png", "fake.pdf", "evil.PNG.html"], "caption": "c"}]
    summary["run"]["warnings"]["log"] = "evil.html"
    folder = make_run(tmp_path, "quick-1", summary)
    (folder / "evil.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')
    (folder / "evil.html").write_text("<script>alert(1)</script>")
    (folder / "evil.PNG.html").write_bytes(PNG)
    (folder / "fake.png").write_text("<html><script>alert(1)</script></html>")
    (folder / "fake.pdf").write_text("<html><script>alert(1)</script></html>")
    code, page, err, tree = render(tmp_path, capsys)
    check_tree(tree, tmp_path)
    files = {h.rsplit("/", 1)[-1] for h in _hrefs(tree) if not h.startswith("#") and not h.endswith("/")}
    assert files == {"toy-error.png", "toy-error.pdf", "metrics.json"}   # no log: it is not warnings.log
    assert code == 1
    for name in ("evil.svg", "evil.html", "fake.png", "fake.pdf", "evil.PNG.html"):
        assert f"figure file '{name}'" in err
    assert "warnings log 'evil.html' is not named warnings.log" in err


def test_a_second_png_that_is_not_one_is_not_linked(tmp_path, capsys):
    summary = record()
    summary["run"]["figures"] = [{"files": ["toy-error.png", "other.png"], "caption": "c"}]
    folder = make_run(tmp_path, "quick-1", summary)
    (folder / "other.png").write_text("<html><script>alert(1)</script></html>")
    code, page, err, tree = render(tmp_path, capsys)
    assert not any(h.endswith("other.png") for h in _hrefs(tree))
    assert code == 1 and "'other.png' is not a PNG file" in err


# ----------------------------------------------------------------------------- item 3: page size


def test_a_figure_listed_many_times_is_embedded_once_and_the_total_is_capped(tmp_path, capsys, monkeypatch):
    budget = 3 * 4096
    monkeypatch.setattr(report_module, "MAX_EMBEDDED_BYTES", budget)
    summary = record()
    summary["run"]["figures"] = ([{"files": ["big.png"], "caption": "same"}] * 60
                                 + [{"files": [f"f{k}.png"], "caption": f"other {k}"} for k in range(5)])
    folder = make_run(tmp_path, "quick-1", summary)
    (folder / "big.png").write_bytes(PNG + os.urandom(4096 - len(PNG)))
    for k in range(5):
        (folder / f"f{k}.png").write_bytes(PNG + os.urandom(4096 - len(PNG)))
    code, page, err, tree = render(tmp_path, capsys)
    check_tree(tree, tmp_path)
    sources = [img.get("src") for img in tree.iter("img")]
    assert len(sources) == len(set(sources)) == budget // 4096          # big.png once, then f0, f1
    assert len(page) < 4 * budget / 3 + 200_000                          # base64 of the budget + text
    assert sum('href="#fig-1"' in ET.tostring(f, encoding="unicode") for f in tree.iter("figure")) == 59
    assert page.count("Not embedded: the page already embeds") == 3     # f2, f3, f4: linked
    assert code == 0, err


def test_a_png_larger_than_the_embedding_limit_is_linked_without_being_read(tmp_path, capsys, monkeypatch):
    folder = make_run(tmp_path, "quick-1", record())
    with open(folder / "toy-error.png", "r+b") as fh:                   # sparse: no disk, no time
        fh.truncate(report_module.MAX_FIGURE_BYTES + 1)
    read = []
    real = report_module.read_inside
    monkeypatch.setattr(report_module, "read_inside", lambda path, limit: read.append(path) or real(path, limit))
    code, page, err, tree = render(tmp_path, capsys)
    assert code == 0, err
    assert "data:image/png" not in page and "Not embedded: it is 32" in page and read == []
    assert any(h.endswith("toy-error.png") for h in _hrefs(tree))


# ----------------------------------------------------------------------------- item 4: terminal


def test_visible_escapes_every_control_and_bidi_character():
    visible = _report_input.visible
    bad = [chr(c) for c in range(0x20)] + [chr(c) for c in range(0x7f, 0xa0)] + [
        "\u061c", "\u200e", "\u200f", *map(chr, range(0x202a, 0x202f)), *map(chr, range(0x2066, 0x206a))]
    for ch in bad:
        out = visible(f"a{ch}b")
        assert ch not in out and out.startswith("a\\") and out.endswith("b"), repr(ch)
    assert visible("plain é α=1e-3 ✓") == "plain é α=1e-3 ✓"
    assert visible("\x1b[31m") == "\\x1b[31m" and visible("\u202e") == "\\u202e"


def test_names_and_keys_from_the_folder_reach_the_terminal_escaped(tmp_path, capsys):
    make_run(tmp_path, "quick-1", record())
    bad_folder = tmp_path / "esc\x1b]0;PWNED\x07\x1b[31mred\u202e"
    bad_folder.mkdir()
    (bad_folder / "metrics.json").write_text('{"experiment": 5}')
    key = tmp_path / "escmetric"
    key.mkdir()
    (key / "metrics.json").write_text(json.dumps(record(metrics={"m\x1b[2J\u2066": 5})))
    summary = record()
    summary["run"]["warnings"]["by_category"] = {"W\x1b[2J\u202e": -1}
    make_run(tmp_path, "quick-2", summary)
    summary = record()
    summary["run"]["figures"] = [{"files": ["x\x1b[2J.svg"], "caption": "c"}]
    folder = make_run(tmp_path, "quick-3", summary)
    (folder / "x\x1b[2J.svg").write_text("<svg/>")
    code = main(["report", str(tmp_path)])
    captured = capsys.readouterr()
    text = captured.err + captured.out
    assert code == 1 and text.count("skipped") >= 3
    for ch in ("\x1b", "\x07", "\u202e", "\u2066"):
        assert ch not in text, repr(ch)
    assert "esc\\x1b]0;PWNED\\x07\\x1b[31mred\\u202e" in text and "m\\x1b[2J\\u2066" in text


# ----------------------------------------------------------------------------- items 5, 6: labels, bidi


def test_known_method_names_always_get_the_vocabulary_label(tmp_path, capsys):
    summary = record()
    config = {"alpha_sparse": 1.0}
    summary["config"] = config
    methods = summary["metrics"]["error"]["methods"]
    a, b = methods.pop("a"), methods.pop("b")
    methods["pg"] = dict(a, label="Dirichlet α=1e-3")                   # a per-metric lie
    methods["dirichlet_sparse"] = dict(b)
    methods["dirichlet_uniform"] = dict(b)
    methods["mine"] = dict(a, label="PG")                                # a plug-in name, a vocabulary label
    methods["theirs"] = dict(b)
    summary["methods"] = {"dirichlet_uniform": {"label": "PG"}, "theirs": {"label": "Their model"}}
    summary["method_labels"] = {"dirichlet_sparse": "PG"}
    make_run(tmp_path, "quick-1", summary)
    code, page, err, tree = render(tmp_path, capsys)
    heads = {th.get("title"): "".join(th.itertext()) for th in tree.iter("th") if th.get("class") == "method"}
    expected = {n: _methods.label(n, config) for n in ("pg", "dirichlet_sparse", "dirichlet_uniform")}
    assert expected["dirichlet_sparse"] == "Dirichlet α=1"                 # the α the run used
    assert heads == {**expected, "mine": "mine", "theirs": "Their model"}
    notes = [("".join(li.itertext())) for li in tree.iter("li")]
    assert any("'mine'" in n and "'PG'" in n and "vocabulary" in n for n in notes)


def test_bidirectional_controls_never_reach_the_page(tmp_path, capsys):
    evil = "gnp\u202e.exe \u2066x\u2069 \u200f\u061c"
    summary = record(experiment="toy" + evil)
    summary["extra"]["notes"].append(evil)
    make_run(tmp_path, "quick-1", summary)
    code, page, err, tree = render(tmp_path, capsys)
    for ch in ("\u202e", "\u2066", "\u2069", "\u200f", "\u061c"):
        assert ch not in page, repr(ch)
    assert "gnp\ufffd.exe" in page


# ----------------------------------------------------------------------------- item 7: stale figures


@pytest.mark.usefixtures("toy_registered")
def test_a_no_plot_rerun_removes_the_figures_it_no_longer_lists(tmp_path, monkeypatch):
    kw = dict(n_seeds=2, jobs=1, out=tmp_path, progress=False, echo=None)
    calls = []
    real = _run.atomic_write_many
    monkeypatch.setattr(_run, "atomic_write_many", lambda files, remove=(): calls.append(
        (sorted(pathlib.Path(p).name for p in files), sorted(pathlib.Path(p).name for p in remove)))
        or real(files, remove))
    first = _run.run_experiment(toy.NAME, plot=True, **kw)
    folder = first.out_dir
    drawn = sorted(p.name for p in first.figures)
    assert drawn and all((folder / n).is_file() for n in drawn)
    assert calls == [(sorted(drawn + ["metrics.json", "warnings.log"]), [])]   # record, log, figures together
    keep = [folder / "notes.png", folder / f"{toy.NAME}.png", folder / f"{toy.NAME}-mine.txt",
            folder / f"{toy.NAME}-mine.png"]       # named like a figure, but no run recorded it
    for p in keep:
        p.write_bytes(b"mine")
    (folder / f"{toy.NAME}-dir.png").mkdir()
    calls.clear()
    second = _run.run_experiment(toy.NAME, plot=False, **kw)
    summary = json.loads((folder / "metrics.json").read_text())
    assert summary["run"]["figures"] == [] and second.figures == ()
    left = sorted(p.name for p in folder.iterdir())
    assert not any(n in left for n in drawn)
    assert all(p.read_bytes() == b"mine" for p in keep) and (folder / f"{toy.NAME}-dir.png").is_dir()
    assert calls == [(["metrics.json", "warnings.log"], drawn)]           # one change, stale figures in it


# ----------------------------------------------------------------------------- item 8: plug-in labels


def test_a_plugins_method_labels_never_relabel_a_vocabulary_name():
    from corrpriors.plotting._curves import curves_figure

    plugin = types.SimpleNamespace(NAME="plug", X_NAME="x", METHOD_LABELS={"pg": "Dirichlet α=1e-3",
                                                                          "mine": "My model"})
    labels = _run.curve_labels(plugin, "m")["labels"]
    assert labels == {"mine": "My model"}
    summary = {"experiment": "plug", "x": {"name": "x", "values": [0.0, 1.0]}, "seeds": [0], "config": {},
               "metrics": {"m": {"better": "lower", "methods": {
                   "pg": {"mean": [1.0, 0.5], "std": [0.0, 0.0]},
                   "mine": {"mean": [2.0, 1.0], "std": [0.0, 0.0]}}}}}
    fig = curves_figure(summary, "m", **_run.curve_labels(plugin, "m"))
    texts = {t.get_text() for ax in fig.axes for leg in [ax.get_legend()] if leg for t in leg.get_texts()}
    texts |= {t.get_text() for leg in fig.legends for t in leg.get_texts()}
    assert texts == {_methods.label("pg"), "My model"}
    assert _run.method_labels(plugin, ["pg", "mine"])["pg"]["label"] == _methods.label("pg")
