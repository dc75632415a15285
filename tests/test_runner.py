"""The experiment runner (`corrpriors reproduce`) on a tiny toy experiment.

This test module *is* the toy experiment: it defines the protocol's attributes at module
level and registers itself under the name ``toy-runner``. ``run_seed`` leaves one marker
file per call in ``Config.log_dir`` so the tests can count which seeds were computed,
even in worker processes.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import sys
import uuid

import numpy as np
import pytest

from corrpriors.experiments import _io, _registry
from corrpriors.experiments._runner import format_table, parse_seeds, run_experiment, seed_generator

# ----------------------------------------------------------------------------- the toy experiment

NAME = "toy-runner"
DESCRIPTION = "toy experiment for the runner tests"
X_NAME = "steps"
METRICS = {"error": "lower", "score": "higher"}
PAPER_SEEDS = 4
QUICK_SEEDS = 2


@dataclasses.dataclass(frozen=True)
class Config:
    n_points: int = 5
    noise: float = 0.1
    log_dir: str = ""
    grid: tuple = (1, 2)


def quick_config() -> Config:
    return Config(n_points=3)


def x_values(config: Config) -> list[float]:
    return [float(10 * i) for i in range(config.n_points)]


def run_seed(config: Config, rng: np.random.Generator) -> dict[str, np.ndarray]:
    seed = int(rng.bit_generator.seed_seq.entropy[0])
    if config.log_dir:
        (pathlib.Path(config.log_dir) / f"call-{seed}-{uuid.uuid4().hex}").touch()
    x = np.asarray(x_values(config))
    noise = config.noise * rng.standard_normal((2, x.size))
    return {
        "error__a": 1.0 / (1.0 + x) + noise[0],
        "error__b": 2.0 / (1.0 + x) + noise[1],
        "score__a": x + noise[0],
        "extra__seed": np.array([seed]),
    }


def summarise_extra(config, seed_results, metrics):
    a = np.mean(metrics["error"]["methods"]["a"]["mean"])
    b = np.mean(metrics["error"]["methods"]["b"]["mean"])
    return {
        "n_seed_results": len(seed_results),
        "claims": [{"claim": "a beats b", "holds": bool(a < b), "detail": f"{a:.3f} vs {b:.3f}"}],
    }


# ----------------------------------------------------------------------------- helpers

THIS = sys.modules[__name__]


@pytest.fixture(autouse=True)
def _toy_registered():
    _registry.register(NAME, THIS)
    yield
    _registry.unregister(NAME)


def calls(log_dir: pathlib.Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in log_dir.glob("call-*"))


def check_schema(summary: dict, seeds: list[int], config: Config) -> None:
    assert set(summary) == {"experiment", "x", "seeds", "config", "metrics", "extra"}
    assert summary["experiment"] == NAME
    assert summary["x"] == {"name": X_NAME, "values": x_values(config)}
    assert summary["seeds"] == seeds
    assert summary["config"] == json.loads(json.dumps(dataclasses.asdict(config)))
    assert set(summary["metrics"]) == set(METRICS)
    for metric, block in summary["metrics"].items():
        assert block["better"] == METRICS[metric]
        for stats in block["methods"].values():
            assert set(stats) == {"mean", "std"}
            assert len(stats["mean"]) == len(stats["std"]) == config.n_points
    assert list(summary["metrics"]["error"]["methods"]) == ["a", "b"]
    assert list(summary["metrics"]["score"]["methods"]) == ["a"]


# ----------------------------------------------------------------------------- tests


def test_end_to_end_files_schema_statistics(tmp_path, capsys):
    log = tmp_path / "log"
    log.mkdir()
    config = Config(log_dir=str(log))
    report = run_experiment(NAME, config=config, n_seeds=3, jobs=1, out=tmp_path / "res", progress=False)
    out_dir = tmp_path / "res" / NAME
    for k in range(3):
        assert (out_dir / "seeds" / f"seed-{k}.npz").is_file()
        meta = json.loads((out_dir / "seeds" / f"seed-{k}.json").read_text())
        assert meta["seed"] == k and meta["config"]["log_dir"] == str(log)
    summary = json.loads((out_dir / "metrics.json").read_text())
    assert summary == report.summary
    check_schema(summary, [0, 1, 2], config)
    # mean/std against an independent recomputation of the three seeds
    rows = np.stack([run_seed(config, seed_generator(NAME, k))["error__b"] for k in range(3)])
    np.testing.assert_allclose(summary["metrics"]["error"]["methods"]["b"]["mean"], rows.mean(0), rtol=1e-12)
    np.testing.assert_allclose(summary["metrics"]["error"]["methods"]["b"]["std"], rows.std(0, ddof=1), rtol=1e-12)
    assert summary["extra"]["n_seed_results"] == 3
    assert summary["extra"]["claims"][0]["holds"] is True
    # default figures (no plot() in the toy): one per metric, png and pdf, non-empty
    assert {p.name for p in report.figures} == {
        f"{NAME}-error.png", f"{NAME}-error.pdf", f"{NAME}-score.png", f"{NAME}-score.pdf"
    }
    assert all(p.stat().st_size > 0 for p in report.figures)
    printed = capsys.readouterr().out
    assert "error (lower is better)" in printed and "[holds] a beats b" in printed


def test_seed_streams_are_fixed_and_distinct():
    a = seed_generator(NAME, 3).standard_normal(4)
    np.testing.assert_array_equal(a, np.random.default_rng([3, __import__("zlib").crc32(NAME.encode())]).standard_normal(4))
    assert not np.allclose(a, seed_generator(NAME, 4).standard_normal(4))
    assert not np.allclose(a, seed_generator("other", 3).standard_normal(4))


def test_resume_recomputes_only_the_missing_seed(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    config = Config(log_dir=str(log))
    first = run_experiment(NAME, config=config, n_seeds=3, jobs=1, out=tmp_path, progress=False, echo=None, plot=False)
    assert calls(log) == [0, 1, 2] and first.computed_seeds == (0, 1, 2)
    (tmp_path / NAME / "seeds" / "seed-1.npz").unlink()
    second = run_experiment(NAME, config=config, n_seeds=3, jobs=1, out=tmp_path, progress=False, echo=None, plot=False)
    assert calls(log) == [0, 1, 1, 2]
    assert second.computed_seeds == (1,) and second.skipped_seeds == (0, 2)
    assert second.summary["metrics"] == first.summary["metrics"]
    # a third run computes nothing; --no-resume recomputes everything
    run_experiment(NAME, config=config, n_seeds=3, jobs=1, out=tmp_path, progress=False, echo=None, plot=False)
    assert calls(log) == [0, 1, 1, 2]
    run_experiment(NAME, config=config, n_seeds=3, jobs=1, out=tmp_path, progress=False, echo=None, resume=False, plot=False)
    assert calls(log) == [0, 0, 1, 1, 1, 2, 2]


def test_changed_config_is_recomputed(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    run_experiment(NAME, config=Config(log_dir=str(log)), n_seeds=2, jobs=1, out=tmp_path, progress=False, echo=None, plot=False)
    run_experiment(NAME, config=Config(log_dir=str(log), noise=0.2), n_seeds=2, jobs=1, out=tmp_path,
                   progress=False, echo=None, plot=False)
    assert calls(log) == [0, 0, 1, 1]


@pytest.mark.parametrize("damage", ["truncate_npz", "garbage_npz", "partial_json", "missing_json", "tmp_leftover"])
def test_corrupt_or_partial_seed_file_is_recomputed(tmp_path, damage):
    log = tmp_path / "log"
    log.mkdir()
    config = Config(log_dir=str(log))
    first = run_experiment(NAME, config=config, n_seeds=2, jobs=1, out=tmp_path, progress=False, echo=None, plot=False)
    npz, js = _io.seed_paths(tmp_path / NAME / "seeds", 0)
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
    second = run_experiment(NAME, config=config, n_seeds=2, jobs=1, out=tmp_path, progress=False, echo=None, plot=False)
    assert second.computed_seeds == (0,) and second.skipped_seeds == (1,)
    assert calls(log) == [0, 0, 1]
    assert second.summary["metrics"] == first.summary["metrics"]


def test_parallel_loky_matches_sequential(tmp_path):
    config = Config()
    seq = run_experiment(NAME, config=config, n_seeds=3, jobs=1, out=tmp_path / "seq", progress=False,
                         echo=None, plot=False)
    par = run_experiment(NAME, config=config, n_seeds=3, jobs=2, out=tmp_path / "par", progress=False,
                         echo=None, plot=False)
    assert par.computed_seeds == (0, 1, 2)
    assert par.summary == seq.summary


def test_bad_inputs_are_reported(tmp_path):
    with pytest.raises(ValueError, match="backend"):
        run_experiment(NAME, backend="spark", out=tmp_path, echo=None)
    with pytest.raises(ValueError, match="seeds"):
        run_experiment(NAME, seeds=[0, 0], out=tmp_path, echo=None)
    with pytest.raises(ValueError, match="unknown experiment"):
        _registry.get_experiment("nope")
    with pytest.raises(ValueError, match="reserved"):
        _registry.register("system-id", THIS)
    assert parse_seeds("0-2,5") == [0, 1, 2, 5]
    with pytest.raises(ValueError, match="seeds"):
        parse_seeds("a,b")


def test_ray_missing_gives_install_hint(tmp_path):
    pytest.importorskip("joblib")
    try:
        import ray  # noqa: F401

        pytest.skip("ray is installed")
    except ImportError:
        pass
    with pytest.raises(ImportError, match=r"corrpriors\[dist\]"):
        run_experiment(NAME, n_seeds=1, backend="ray", out=tmp_path, progress=False, echo=None, plot=False)


def test_missing_experiment_module_is_unavailable_not_a_crash():
    _registry.register("ghost", "corrpriors.experiments.does_not_exist")
    try:
        entry = _registry.available_experiments()["ghost"]
        assert isinstance(entry, str) and "not implemented" in entry
    finally:
        _registry.unregister("ghost")


def test_bad_seed_result_is_rejected(tmp_path, monkeypatch):
    monkeypatch.setattr(THIS, "run_seed", lambda config, rng: {"error__a": np.zeros(2)})
    with pytest.raises(ValueError, match=r"shape \(len\(x_values\),\)"):
        run_experiment(NAME, config=Config(), n_seeds=1, jobs=1, out=tmp_path, progress=False, echo=None, plot=False)
    assert not (tmp_path / NAME / "seeds" / "seed-0.json").exists()


def test_table_lists_every_method():
    summary = {
        "experiment": "t", "x": {"name": "x", "values": list(range(10))}, "seeds": [0],
        "metrics": {"m": {"better": "lower", "methods": {"a": {"mean": [0.5] * 10, "std": [0.0] * 10}}}},
        "extra": {},
    }
    text = format_table(summary)
    assert "m (lower is better)" in text and "0.500±0.000" in text


def _cli_main():
    """``corrpriors.cli.main``; if another sub-command's module is not written yet, the same
    ``reproduce`` parser built from ``_cli.configure`` (what cli.py does for it)."""
    from corrpriors import cli

    try:
        cli.build_parser()
        return cli.main
    except ModuleNotFoundError:
        import argparse

        from corrpriors.experiments import _cli

        def main(argv):
            parser = argparse.ArgumentParser(prog="corrpriors")
            sub = parser.add_subparsers(dest="command")
            p = sub.add_parser("reproduce")
            _cli.configure(p)
            args = parser.parse_args(argv)
            return _cli.run(args)

        return main


def test_cli_end_to_end(tmp_path, capsys):
    main = _cli_main()
    log = tmp_path / "log"
    log.mkdir()
    out = tmp_path / "res"
    code = main(["reproduce", NAME, "--quick", "--seeds", "0,2", "--jobs", "1", "--out", str(out), "--no-progress"])
    assert code == 0
    summary = json.loads((out / NAME / "metrics.json").read_text())
    check_schema(summary, [0, 2], quick_config())
    assert (out / NAME / f"{NAME}-error.pdf").is_file()
    assert main(["reproduce", "--list"]) == 0
    assert "system-id" in capsys.readouterr().out
    assert main(["reproduce", "nope", "--out", str(out)]) == 2


def test_out_defaults_to_results(tmp_path, monkeypatch):
    main = _cli_main()
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", NAME, "--quick", "--jobs", "1", "--no-progress"]) == 0
    assert (tmp_path / "results" / NAME / "metrics.json").is_file()
    assert sorted(p.name for p in (tmp_path / "results" / NAME / "seeds").glob("*.npz")) == [
        "seed-0.npz", "seed-1.npz"
    ]


def test_cli_reports_a_failing_experiment(tmp_path, monkeypatch, capsys):
    main = _cli_main()

    def boom(config, rng):
        raise RuntimeError("boom")

    monkeypatch.setattr(THIS, "run_seed", boom)
    code = main(["reproduce", NAME, "--quick", "--jobs", "1", "--out", str(tmp_path), "--no-progress"])
    assert code == 1
    assert "boom" in capsys.readouterr().err


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
    _, ax = plot_metric_curves(summary, "m", logx=True)
    assert ax.get_xscale() == "log" and len(ax.get_lines()[0].get_xdata()) == 2  # x = 0 left out
    with pytest.raises(ValueError, match="metric"):
        plot_metric_curves(summary, "nope")
    with pytest.raises(ValueError, match="methods"):
        plot_metric_curves(summary, "m", methods=["zzz"])
