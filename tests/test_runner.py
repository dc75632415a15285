"""The experiment runner (`corrpriors reproduce`) on a tiny toy experiment (tests/toy_experiment.py)."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sys
import zlib

import numpy as np
import pytest

import toy_experiment as toy
from corrpriors.runner import SeedResult, _io
from corrpriors.runner import registry as _registry
from corrpriors.runner._config import config_hash
from corrpriors.runner._run import format_table, parse_seeds, run_experiment, seed_generator

NAME = toy.NAME
Config = toy.Config


pytestmark = pytest.mark.usefixtures("toy_registered")   # (conftest)


def calls(log_dir: pathlib.Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in log_dir.glob("call-*"))


def run_dir(out: pathlib.Path, config: Config) -> pathlib.Path:
    label = "paper" if config == Config() else "quick" if config == toy.quick_config() else "custom"
    return out / NAME / f"{label}-{config_hash(NAME, _io.config_to_json(config))}"


def check_schema(summary: dict, seeds: list[int], config: Config) -> None:
    assert set(summary) == {"experiment", "vocabulary", "methods", "x", "seeds", "config", "metrics", "extra",
                            "run"}
    assert summary["experiment"] == NAME and summary["vocabulary"] == 2
    # the toy's methods a, b are not in the vocabulary: their label is their name
    assert summary["methods"] == {"a": {"label": "a"}, "b": {"label": "b"}}
    assert summary["x"] == {"name": toy.X_NAME, "values": toy.x_values(config)}
    assert summary["seeds"] == seeds
    resolved = toy.resolve_config(config)
    assert summary["config"] == json.loads(json.dumps(dataclasses.asdict(resolved)))
    assert set(summary["metrics"]) == set(toy.METRICS)
    for metric, block in summary["metrics"].items():
        assert block["better"] == toy.METRICS[metric]
        for stats in block["methods"].values():
            assert set(stats) == {"mean", "std", "per_seed"}
            assert len(stats["per_seed"]) == len(seeds)
            assert len(stats["mean"]) == len(stats["std"]) == config.n_points
    assert list(summary["metrics"]["error"]["methods"]) == ["a", "b"]
    assert list(summary["metrics"]["score"]["methods"]) == ["a"]


# ----------------------------------------------------------------------------- tests


def test_end_to_end_files_schema_statistics(tmp_path, capsys):
    log = tmp_path / "log"
    log.mkdir()
    config = Config(log_dir=str(log))
    report = run_experiment(NAME, config=config, n_seeds=3, jobs=1, out=tmp_path / "res", progress=False)
    folder = run_dir(tmp_path / "res", config)
    assert report.out_dir == folder
    for k in range(3):
        assert (folder / "seeds" / f"seed-{k}.npz").is_file()
        meta = json.loads((folder / "seeds" / f"seed-{k}.json").read_text())
        assert meta["seed"] == k and meta["config"]["log_dir"] == str(log)
    summary = json.loads((folder / "metrics.json").read_text())
    assert summary == report.summary
    check_schema(summary, [0, 1, 2], config)
    # mean/std against an independent recomputation of the three seeds
    rows = np.stack([toy.run_seed(config, rng=seed_generator(NAME, k)).curves["error"]["b"] for k in range(3)])
    np.testing.assert_allclose(summary["metrics"]["error"]["methods"]["b"]["mean"], rows.mean(0), rtol=1e-12)
    np.testing.assert_allclose(summary["metrics"]["error"]["methods"]["b"]["std"], rows.std(0, ddof=1), rtol=1e-12)
    np.testing.assert_array_equal(summary["metrics"]["error"]["methods"]["b"]["per_seed"], rows)
    assert summary["extra"]["n_seed_results"] == 3
    [claim] = summary["extra"]["claims"]
    assert claim["claim"] == "a beats b" and claim["holds"] is True and " vs " in claim["detail"]
    # default figures (no figures() in the toy): one per metric, png and pdf, non-empty
    assert {p.name for p in report.figures} == {
        f"{NAME}-error.png", f"{NAME}-error.pdf", f"{NAME}-score.png", f"{NAME}-score.pdf"
    }
    assert all(p.stat().st_size > 0 and p.parent == folder for p in report.figures)
    assert [f["files"] for f in summary["run"]["figures"]] == [
        [f"{NAME}-error.png", f"{NAME}-error.pdf"], [f"{NAME}-score.png", f"{NAME}-score.pdf"]]
    printed = capsys.readouterr().out
    assert "error (lower is better)" in printed and "a beats b" in printed


def test_seed_result_round_trips_through_the_seed_files(tmp_path):
    result = toy.run_seed(Config(), rng=seed_generator(NAME, 0))
    result = dataclasses.replace(result, extras={**result.extras, "ints": np.arange(6).reshape(2, 3),
                                                 "flags": np.array([True, False])})
    _io.save_seed(tmp_path, 0, result, experiment=NAME, config_json={"a": 1})
    loaded = _io.load_seed(tmp_path, 0, experiment=NAME, config_json={"a": 1}).result
    for metric in result.curves:
        assert list(loaded.curves[metric]) == list(result.curves[metric])
        for m in result.curves[metric]:
            np.testing.assert_array_equal(loaded.curves[metric][m], result.curves[metric][m])
    for k, v in result.extras.items():
        assert loaded.extras[k].dtype == v.dtype
        np.testing.assert_array_equal(loaded.extras[k], v)
    np.testing.assert_array_equal(loaded.method_extras["offset"]["b"], result.method_extras["offset"]["b"])
    with np.load(tmp_path / "seed-0.npz", allow_pickle=False) as npz:  # plain npz, readable names
        assert "curves/error/a" in npz.files and "extras/ints" in npz.files


def test_seed_result_rejects_bad_content():
    with pytest.raises(ValueError, match="object array"):
        SeedResult(curves={"m": {"a": np.array([None, 1])}})
    with pytest.raises(ValueError, match="name"):
        SeedResult(curves={"m/x": {"a": np.zeros(2)}})
    with pytest.raises(TypeError, match="curves"):
        SeedResult(curves={"m": np.zeros(2)})


def test_seed_streams_are_fixed_and_distinct():
    a = seed_generator(NAME, 3).standard_normal(4)
    np.testing.assert_array_equal(a, np.random.default_rng([3, zlib.crc32(NAME.encode())]).standard_normal(4))
    assert not np.allclose(a, seed_generator(NAME, 4).standard_normal(4))
    assert not np.allclose(a, seed_generator("other", 3).standard_normal(4))


def test_resume_recomputes_only_the_missing_seed(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    config = Config(log_dir=str(log))
    kw = dict(config=config, n_seeds=3, jobs=1, out=tmp_path, progress=False, echo=None, plot=False)
    first = run_experiment(NAME, **kw)
    assert calls(log) == [0, 1, 2] and first.computed_seeds == (0, 1, 2)
    (run_dir(tmp_path, config) / "seeds" / "seed-1.npz").unlink()
    second = run_experiment(NAME, **kw)
    assert calls(log) == [0, 1, 1, 2]
    assert second.computed_seeds == (1,) and second.skipped_seeds == (0, 2)
    assert second.summary["metrics"] == first.summary["metrics"]
    # a third run computes nothing; --no-resume recomputes everything
    run_experiment(NAME, **kw)
    assert calls(log) == [0, 1, 1, 2]
    run_experiment(NAME, **kw, resume=False)
    assert calls(log) == [0, 0, 1, 1, 1, 2, 2]


def test_other_seeds_of_a_configuration_say_what_they_replace(tmp_path):
    """metrics.json summarises the seeds of the last run; a run of other seeds of the same
    configuration replaces it (the seed files of both stay) and says so, with the seed list
    that summarises all of them; the same seeds again, or all of them, replace nothing silently."""
    from corrpriors.runner._run import seed_text

    config = Config(log_dir=str(tmp_path))
    lines: list[str] = []
    kw = dict(config=config, jobs=1, out=tmp_path, progress=False, echo=lines.append, plot=False)
    run_experiment(NAME, seeds=[0, 1], **kw)
    assert not any("note: metrics.json" in line for line in lines)
    lines.clear()
    report = run_experiment(NAME, seeds=[5, 6], **kw)
    text = " ".join(line.strip() for line in lines)
    assert report.summary["seeds"] == [5, 6]
    assert "note: metrics.json and the figures summarised seeds 0-1; they now summarise seeds 5-6" in text
    assert "--seeds 0-1,5-6 summarises all of them" in text
    lines.clear()
    both = run_experiment(NAME, seeds=[0, 1, 5, 6], **kw)
    assert both.computed_seeds == () and "note: metrics.json and the figures summarised seeds 5-6" in " ".join(lines)
    lines.clear()
    run_experiment(NAME, seeds=[0, 1, 5, 6], **kw)
    assert not any("note: metrics.json" in line for line in lines)
    assert seed_text([7, 0, 2, 1, 9, 10]) == "0-2,7,9-10" and seed_text([]) == ""


def test_a_results_revision_moves_a_configuration_to_a_new_folder(tmp_path, monkeypatch):
    """Code that changes a configuration's numbers raises the experiment's RESULTS_REVISION: its
    seeds go to a new folder and none computed before is read back (they are matched by the
    configuration alone). Without a revision the folder is the one it always was."""
    from corrpriors.experiments import transfer
    from corrpriors.runner._config import results_revision, run_folder_name

    log = tmp_path / "log"
    log.mkdir()
    config = Config(log_dir=str(log))
    kw = dict(config=config, n_seeds=2, jobs=1, out=tmp_path, progress=False, echo=None, plot=False)
    first = run_experiment(NAME, **kw)
    assert first.out_dir == run_dir(tmp_path, config) and results_revision(toy) == 0
    monkeypatch.setattr(toy, "RESULTS_REVISION", 1, raising=False)
    second = run_experiment(NAME, **kw)
    assert second.out_dir != first.out_dir and second.out_dir.parent == first.out_dir.parent
    assert second.computed_seeds == (0, 1) and calls(log) == [0, 0, 1, 1]
    assert second.out_dir.name == run_folder_name(toy, config)
    assert results_revision(transfer) >= 1
    assert run_folder_name(transfer, transfer.Config()) != "default-" + config_hash(
        transfer.NAME, _io.config_to_json(transfer.Config()))


def test_changed_config_is_recomputed_in_its_own_folder(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    kw = dict(n_seeds=2, jobs=1, out=tmp_path, progress=False, echo=None, plot=False)
    a = run_experiment(NAME, config=Config(log_dir=str(log)), **kw)
    b = run_experiment(NAME, config=Config(log_dir=str(log), noise=0.2), **kw)
    assert calls(log) == [0, 0, 1, 1]
    assert a.out_dir != b.out_dir and a.out_dir.parent == b.out_dir.parent
    assert a.out_dir.name.startswith("custom-") and (a.out_dir / "metrics.json").is_file()


@pytest.mark.parametrize("damage", ["truncate_npz", "garbage_npz", "partial_json", "missing_json", "tmp_leftover"])
def test_corrupt_or_partial_seed_file_is_recomputed(tmp_path, damage):
    log = tmp_path / "log"
    log.mkdir()
    config = Config(log_dir=str(log))
    kw = dict(config=config, n_seeds=2, jobs=1, out=tmp_path, progress=False, echo=None, plot=False)
    first = run_experiment(NAME, **kw)
    npz, js = _io.seed_paths(run_dir(tmp_path, config) / "seeds", 0)
    if damage == "truncate_npz":
        data = npz.read_bytes()
        npz.write_bytes(data[: len(data) // 2])
    elif damage == "garbage_npz":
        data = bytearray(npz.read_bytes())
        data[-40] ^= 0xFF  # one flipped byte: same size, still "looks" like a file
        npz.write_bytes(bytes(data))
    elif damage == "partial_json":
        js.write_text(js.read_text()[:20])
    elif damage == "missing_json":
        js.unlink()
    else:  # a killed writer leaves a temporary file and no final file
        npz.rename(npz.with_name(".seed-0.npz.abc.tmp"))
    second = run_experiment(NAME, **kw)
    assert second.computed_seeds == (0,) and second.skipped_seeds == (1,)
    assert calls(log) == [0, 0, 1]
    assert second.summary["metrics"] == first.summary["metrics"]


def test_parallel_loky_matches_sequential(tmp_path):
    config = Config()
    kw = dict(config=config, n_seeds=3, progress=False, echo=None, plot=False)
    seq = run_experiment(NAME, jobs=1, out=tmp_path / "seq", **kw)
    par = run_experiment(NAME, jobs=2, out=tmp_path / "par", **kw)
    assert par.computed_seeds == (0, 1, 2)
    assert par.summary == seq.summary


def test_bad_inputs_are_reported(tmp_path):
    with pytest.raises(ValueError, match="backend"):
        run_experiment(NAME, backend="spark", out=tmp_path, echo=None)
    with pytest.raises(ValueError, match="seeds"):
        run_experiment(NAME, seeds=[0, 0], out=tmp_path, echo=None)
    with pytest.raises(ValueError, match="n_points"):  # the experiment's check_config, before any I/O
        run_experiment(NAME, config=Config(n_points=0), out=tmp_path / "never", echo=None)
    assert not (tmp_path / "never").exists()
    with pytest.raises(ValueError, match="unknown experiment"):
        _registry.get_experiment("nope")
    with pytest.raises(ValueError, match="reserved"):
        _registry.register("system-id", toy)
    with pytest.raises(TypeError, match="lacks"):
        _registry.register("broken", object())


def test_an_object_can_be_an_experiment(tmp_path):
    """The protocol is structural: a class instance (e.g. one per environment) works like a module."""

    class Shifted:
        NAME, DESCRIPTION, X_NAME = "toy-object", "an object experiment", "steps"
        METRICS = {"error": "lower"}
        PAPER_SEEDS = QUICK_SEEDS = 1
        Config = toy.Config

        def __init__(self, shift):
            self.shift = shift

        def quick_config(self):
            return toy.quick_config()

        def x_values(self, config):
            return toy.x_values(config)

        def run_seed(self, config, rng):
            return SeedResult(curves={"error": {"a": np.full(config.n_points, self.shift)}})

    report = run_experiment(Shifted(2.5), quick=True, jobs=1, out=tmp_path, progress=False, echo=None)
    assert report.summary["metrics"]["error"]["methods"]["a"]["mean"] == [2.5, 2.5, 2.5]
    assert report.out_dir.parent == tmp_path / "toy-object"


@pytest.mark.parametrize("backend, module", [("ray", "ray"), ("dask", "dask.distributed")])
def test_missing_backend_package_refused_before_anything_is_written(tmp_path, monkeypatch, backend, module):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(ImportError, match=r"corrpriors\[dist\]"):
        run_experiment(NAME, n_seeds=1, backend=backend, out=tmp_path, progress=False, echo=None, plot=False)
    assert not any(tmp_path.iterdir())


def test_missing_experiment_module_is_unavailable_not_a_crash():
    _registry.register("ghost", "corrpriors.experiments.does_not_exist")
    try:
        entry = _registry.available_experiments()["ghost"]
        assert isinstance(entry, str) and "not implemented" in entry
    finally:
        _registry.unregister("ghost")


def test_bad_seed_result_is_rejected(tmp_path, monkeypatch):
    from corrpriors.runner import RunFailed

    monkeypatch.setattr(toy, "run_seed", lambda config, rng: SeedResult(curves={"error": {"a": np.zeros(2)}}))
    with pytest.raises(RunFailed, match=r"shape \(len\(x_values\),\)"):
        run_experiment(NAME, config=Config(), n_seeds=1, jobs=1, out=tmp_path, progress=False, echo=None, plot=False)
    assert not list(tmp_path.rglob("seed-0.json"))
    monkeypatch.setattr(toy, "run_seed", lambda config, rng: {"error__a": np.zeros(5)})
    with pytest.raises(RunFailed, match="must return a SeedResult"):
        run_experiment(NAME, config=Config(), n_seeds=1, jobs=1, out=tmp_path, progress=False, echo=None, plot=False)


def test_table_lists_every_method_and_labels_claims():
    summary = {
        "experiment": "t", "x": {"name": "x", "values": list(range(10))}, "seeds": [0],
        "metrics": {"m": {"better": "lower", "methods": {"a": {"mean": [0.5] * 10, "std": [0.0] * 10}}}},
        "extra": {"claims": [{"claim": "c1", "holds": True, "detail": "d"},
                             {"claim": "c2", "holds": False, "detail": "d"}]},
        "run": {"claims": "paper-scale"},
    }
    text = format_table(summary)
    assert "m (lower is better)" in text and "0.500±0.000" in text
    assert "[holds] c1" in text and "[DOES NOT HOLD] c2" in text
    summary["run"]["claims"] = "indicative (1 seed, quick settings; see README for the paper-scale verdict)"
    text = format_table(summary)
    assert "claim checks (indicative: 1 seed, quick settings)" in text
    assert "[met] c1" in text and "[not met] c2" in text and "DOES NOT HOLD" not in text


def test_parse_seeds_accepts_lists_and_ranges():
    assert parse_seeds("0-2,5") == [0, 1, 2, 5]
    assert parse_seeds(" 7 ") == [7]
    assert parse_seeds("3-3") == [3]
    with pytest.raises(ValueError, match="seeds"):
        parse_seeds("a,b")
    with pytest.raises(ValueError, match=r"^--sizes: value\(s\) \[10\] given more than once"):
        parse_seeds("10,5-10", name="--sizes")     # another field's list names that field


def test_metric_curves_draw_means_and_std_bands():
    from corrpriors.plotting._curves import plot_metric_curves

    summary = {
        "experiment": "t", "x": {"name": "x", "values": [0.0, 10.0, 100.0]}, "seeds": [0, 1],
        "metrics": {"m": {"better": "lower", "methods": {
            "a": {"mean": [1.0, 0.5, 0.25], "std": [0.1, 0.2, 0.0]},
            "b": {"mean": [2.0, 1.0, None], "std": [0.0, 0.0, None]},
        }}},
    }
    fig, ax = plot_metric_curves(summary, "m", methods=["a"], labels={"a": "method A"})
    (line,) = ax.get_lines()
    np.testing.assert_array_equal(line.get_ydata(), [1.0, 0.5, 0.25])
    (band,) = ax.collections
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.max() == pytest.approx(1.1) and ys.min() == pytest.approx(0.25)
    assert ax.get_legend().get_texts()[0].get_text() == "method A"
    _, ax = plot_metric_curves(summary, "m", methods=["a"], limits=(0.3, 1.05))   # a probability's range
    ys = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert ys.max() == pytest.approx(1.05) and ys.min() == pytest.approx(0.3)
    _, ax = plot_metric_curves(summary, "m", logx=True)
    assert ax.get_xscale() == "log" and len(ax.get_lines()[0].get_xdata()) == 2  # x = 0 left out
    with pytest.raises(ValueError, match="metric"):
        plot_metric_curves(summary, "nope")
    with pytest.raises(ValueError, match="methods"):
        plot_metric_curves(summary, "m", methods=["zzz"])


def test_a_seeds_reference_cycles_are_freed_before_the_next_seed():
    """A worker runs many seeds: the cyclic garbage of one (a multi-task model and its beliefs
    point at each other) must not wait for an automatic full collection (a loky worker grew by
    about 150 MB per transfer seed until loky restarted it)."""
    import gc
    import weakref

    from corrpriors.runner._run import _execute_seed

    kept: list = []

    class Node:
        def __init__(self) -> None:
            self.other = self
            self.data = np.zeros(1000)

    def run_seed(config, *, rng):
        node = Node()   # a cycle, garbage once the seed returns
        kept.append(weakref.ref(node))
        return toy.run_seed(config, rng=rng)

    enabled = gc.isenabled()
    gc.disable()   # no automatic collection: only _execute_seed's own can free the cycle
    try:
        seed, result, _, _ = _execute_seed(run_seed, toy.quick_config(), NAME, 0)
        assert kept[0]() is None
    finally:
        if enabled:
            gc.enable()
    assert seed == 0 and isinstance(result, SeedResult)


@pytest.mark.parametrize("typed", ["\uff10.\uff15", " 0.5", "0.5\n", "0_5"])
def test_a_number_written_as_text_must_be_ascii_for_every_setting_that_takes_one(typed):
    """float() reads full-width digits, padding and underscores; a setting that takes an option
    or a number (the transfer similarity, the Gymnasium commands' concentration) refuses them
    in the one constraint both use, so no such text is recorded as typed."""
    from corrpriors.runner._ranges import CONCENTRATION, Interval, OptionsOrNumber

    for constraint in (OptionsOrNumber(("auto", "none"), CONCENTRATION),
                       OptionsOrNumber(("learned",), Interval(float, 0.0, 1.0, closed="left"))):
        with pytest.raises(ValueError, match=r"^x: expected '.*' or a value written in ASCII digits"):
            constraint.check(typed, "x")
        constraint.check("0.5", "x")


def test_full_scale_status_names_the_experiments_own_defaults():
    """An experiment whose defaults are not the paper's (transfer) is not stamped 'paper-scale'."""
    import html
    import types

    from corrpriors.experiments import psrl_grid, transfer
    from corrpriors.runner import report
    from corrpriors.runner._run import claims_status

    assert claims_status(psrl_grid, "paper", psrl_grid.PAPER_SEEDS) == "paper-scale"
    status = claims_status(transfer, "default", transfer.PAPER_SEEDS)
    assert status == "full-scale (default settings)"
    assert "paper" not in claims_status(transfer, "default", 2)
    summary = {"experiment": "transfer", "x": {"name": "x", "values": [1.0]}, "seeds": [0],
               "metrics": {"m": {"better": "lower", "methods": {"a": {"mean": [0.5], "std": [0.0]}}}},
               "extra": {"claims": [{"claim": "c1", "holds": False, "detail": "d"}]}, "run": {"claims": status}}
    text = format_table(summary)
    assert "claim checks (full scale)" in text and "[DOES NOT HOLD] c1" in text
    claim = types.SimpleNamespace(claim="c1", holds=True, detail="d")
    record = types.SimpleNamespace(claims=(claim,), seeds=tuple(range(20)), settings="default", status=status)
    page = html.unescape("".join(str(part) for part in report._claims(record)))
    assert "Verdicts at full scale (20 seeds, the experiment's default settings, which are not the paper's)" in page
    assert "the paper's settings" not in page
    record.status = "paper-scale"          # the paper's experiments (and older records) keep their wording
    assert "Verdicts at paper scale (20 seeds, the paper's settings)" in html.unescape(
        "".join(map(str, report._claims(record))))


def test_figures_of_indicative_runs_say_so_in_their_title():
    """A quick run's figures carry "indicative" in their title, as its terminal summary and
    report do; a full-scale run's figures are left as drawn."""
    from corrpriors.plotting._common import new_figure
    from corrpriors.runner._run import _mark_figures
    from corrpriors.runner.protocol import FigureSpec

    titled, plain = new_figure((4, 3)), new_figure((4, 3))
    titled.suptitle("Tunnel world: 2 seeds, mean")
    specs = [FigureSpec("a", titled, "c"), FigureSpec("b", plain, "c")]
    _mark_figures(specs, "indicative (2 seeds, quick settings; see README)", "quick", 2)
    assert titled.get_suptitle() == "Tunnel world: 2 seeds, mean\nquick settings, 2 seeds: indicative only"
    assert plain.get_suptitle() == "quick settings, 2 seeds: indicative only"
    full = new_figure((4, 3))
    full.suptitle("Tunnel world: 20 seeds, mean")
    _mark_figures([FigureSpec("c", full, "c")], "paper-scale", "paper", 20)
    _mark_figures([FigureSpec("c", full, "c")], "full-scale (default settings)", "default", 20)
    assert full.get_suptitle() == "Tunnel world: 20 seeds, mean"
    one = new_figure((4, 3))
    _mark_figures([FigureSpec("d", one, "c")], "indicative (1 seed, ...)", "paper", 1)
    assert one.get_suptitle() == "paper settings, 1 seed: indicative only"


@pytest.mark.parametrize("settings, recorded, read", [
    ("default", "paper-scale", "full-scale (default settings)"),   # transfer before round 19
    ("paper", "paper-scale", "paper-scale"),
    ("default", "full-scale (default settings)", "full-scale (default settings)"),
    ("quick", "indicative (2 seeds, quick settings; see README)", "indicative (2 seeds, quick settings; see README)"),
])
def test_old_records_stamped_paper_scale_at_other_defaults_read_as_full_scale(tmp_path, settings, recorded, read):
    from corrpriors.runner._report_input import read_record

    summary = {"experiment": "transfer", "x": {"name": "x", "values": [1.0]}, "seeds": [0],
               "metrics": {"m": {"better": "lower", "methods": {"pg": {"mean": [0.5], "std": [0.0]}}}},
               "run": {"settings": settings, "claims": recorded}}
    (tmp_path / "metrics.json").write_text(json.dumps(summary))
    assert read_record(tmp_path / "metrics.json", tmp_path.resolve()).status == read
