"""``corrpriors report`` treats every file under DIR as untrusted (issue 23, items 1-4).

Each test builds a results folder by hand (no experiment runs), renders it with the command and
parses the page strictly as XML: escaping, files outside DIR, ``-o`` over inputs, malformed
records skipped with a reason, and a property-based test over fuzzed ``metrics.json`` files.
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corrpriors.cli import main

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32       # the magic number is all the report checks
SECRET = "TOP-SECRET-CONTENT-7f3a"
#: The only elements the page may contain.
ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "ul", "li", "a",
                "code", "span", "figure", "img", "figcaption", "table", "caption", "tr", "th", "td", "wbr"}


def record(**changes) -> dict:
    """A valid metrics.json as the runner writes it (two methods, three x values, a claim)."""
    base = {
        "experiment": "toy-runner",
        "x": {"name": "steps", "values": [0.0, 10.0, 20.0]},
        "seeds": [0, 1],
        "config": {"n_points": 3, "noise": 0.1, "grid": [1, 2], "label": "x", "lengthscale": 3.0},
        "metrics": {"error": {"better": "lower", "methods": {
            "a": {"mean": [1.0, 0.5, 0.25], "std": [0.1, 0.05, 5.66e-06]},
            "b": {"mean": [2.0, 1.0, 0.5], "std": [0.2, 0.1, 0.0]}}}},
        "extra": {"claims": [{"claim": "a beats b", "holds": True, "detail": "0.58 vs 1.17"},
                             {"claim": "b beats a", "holds": False, "detail": "1.17 vs 0.58"}],
                  "notes": ["a toy note"]},
        "run": {"settings": "quick", "config_hash": "0123456789", "folder": "quick-0123456789",
                "overrides": {"noise": 0.1}, "resolved": {"lengthscale": {"given": 0.0, "used": 3.0}},
                "claims": "indicative (2 seeds, quick settings; see README for the paper-scale verdict)",
                "warnings": {"count": 0, "by_category": {}, "log": "warnings.log"},
                "figures": [{"files": ["toy-error.png", "toy-error.pdf"], "caption": "the error"}]},
    }
    base.update(changes)
    return base


def make_run(root: pathlib.Path, name: str, summary, *, raw: bytes | None = None) -> pathlib.Path:
    folder = root / "toy-runner" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "toy-error.png").write_bytes(PNG)
    (folder / "toy-error.pdf").write_bytes(b"%PDF-1.4\n")
    (folder / "warnings.log").write_text("# no warnings\n")
    (folder / "config.json").write_text(json.dumps({"experiment": "toy-runner", "config": {}}))
    (folder / "seeds").mkdir(exist_ok=True)
    (folder / "metrics.json").write_bytes(raw if raw is not None else json.dumps(summary).encode())
    return folder


def render(root: pathlib.Path, capsys, *extra: str) -> tuple[int, str, str, ET.Element | None]:
    code = main(["report", str(root), *extra])
    captured = capsys.readouterr()
    page_path = root / "report.html" if not extra else pathlib.Path(extra[-1])
    page = page_path.read_text(encoding="utf-8") if page_path.exists() else ""
    tree = ET.fromstring(page.split("\n", 1)[1]) if page else None   # strict XML after the doctype
    return code, page, captured.err, tree


def check_tree(tree: ET.Element, root: pathlib.Path) -> None:
    """Only known elements, no event handlers or scripts, every reference local and inside root."""
    for el in tree.iter():
        assert el.tag in ALLOWED_TAGS, el.tag
        for name, value in el.attrib.items():
            assert not name.lower().startswith("on"), name
            if name in ("href", "src"):
                if value.startswith("data:"):
                    assert name == "src" and value.startswith("data:image/png;base64,")
                    continue
                assert not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", value), value   # no scheme at all
                if value.startswith("#"):
                    continue
                from urllib.parse import unquote
                target = (root / unquote(value)).resolve()
                assert target.is_relative_to(root.resolve()), value


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "outside" / "secret.png"
    path.parent.mkdir()
    path.write_bytes(PNG + SECRET.encode())
    text = tmp_path / "outside" / "passwd"
    text.write_text(SECRET)
    return path, text


# ----------------------------------------------------------------------------- escaping


def test_every_string_of_a_record_is_escaped(tmp_path, capsys):
    evil = '<script>alert(1)</script>"\'&<img src=x onerror=alert(2)>'
    summary = record(experiment=evil)
    summary["x"]["name"] = evil
    summary["metrics"] = {evil: {"better": "lower", "methods": {evil: {"mean": [1, 2, 3], "std": [0, 0, 0],
                                                                         "label": evil}}}}
    summary["extra"] = {"claims": [{"claim": evil, "holds": True, "detail": evil}], "notes": [evil]}
    summary["config"] = {evil: evil, "list": [evil, {evil: evil}]}
    summary["run"].update(settings=evil, config_hash=evil, claims=evil, overrides={evil: 1})
    summary["run"]["figures"][0]["caption"] = evil
    summary["run"]["warnings"]["by_category"] = {evil: 3}
    make_run(tmp_path, "quick-1", summary)
    code, page, err, tree = render(tmp_path, capsys)
    assert code == 0, err
    check_tree(tree, tmp_path)
    assert "<script" not in page and "onerror=" not in page.replace("onerror=alert", "")  # text only
    assert not any(el.tag == "script" for el in tree.iter())
    assert evil in "".join(tree.itertext())          # the text survives, as text


def test_a_string_where_a_number_belongs_is_skipped_not_printed(tmp_path, capsys):
    summary = record()
    summary["metrics"]["error"]["methods"]["a"]["mean"][0] = "<script>alert(1)</script>"
    make_run(tmp_path, "quick-1", summary)
    make_run(tmp_path, "quick-2", record())
    code, page, err, tree = render(tmp_path, capsys)
    assert code == 1
    assert "metrics.error.methods.a.mean[0]: expected a number or null, got a string" in err
    assert "<script>" not in page and "&lt;script&gt;" in page      # only in the (escaped) reason
    check_tree(tree, tmp_path)
    assert page.count('class="metric"') == 1                        # the good run is still there


@pytest.mark.parametrize("char", ["\x00", "\x01", "\x0b", "\x1f", "\ud800", "\ufffe", "\x85"])
def test_characters_xml_forbids_do_not_break_the_page(tmp_path, capsys, char):
    summary = record()
    summary["extra"]["notes"] = [f"before{char}after"]
    make_run(tmp_path, "quick-1", summary)
    code, page, err, tree = render(tmp_path, capsys)
    assert code == 0, err
    assert "before\ufffdafter" in page


# ----------------------------------------------------------------------------- files


def test_a_symlinked_figure_outside_dir_is_not_embedded(tmp_path, capsys, secret):
    root = tmp_path / "results"
    folder = make_run(root, "quick-1", record())
    (folder / "toy-error.png").unlink()
    (folder / "toy-error.png").symlink_to(secret[0])
    (folder / "toy-error.pdf").unlink()
    (folder / "toy-error.pdf").symlink_to(secret[1])
    code, page, err, tree = render(root, capsys)
    assert code == 1 and "leads outside the results folder" in err
    assert "data:image/png" not in page and "secret" not in page.split("Not shown")[0]
    check_tree(tree, root)
    assert SECRET not in page and "VE9QLVNFQ1JFVC" not in page      # nor its base64


@pytest.mark.parametrize("name", ["{secret}", "../../../outside/secret.png", "..\\..\\outside\\secret.png",
                                  "/etc/passwd", "sub/../../../../outside/secret.png", "", 5, None])
def test_figure_paths_outside_the_run_folder_are_refused(tmp_path, capsys, secret, name):
    root = tmp_path / "results"
    summary = record()
    if name == "{secret}":
        name = str(secret[0])
    summary["run"]["figures"] = [{"files": [name], "caption": "c"}]
    make_run(root, "quick-1", summary)
    code, page, err, tree = render(root, capsys)
    check_tree(tree, root)
    assert SECRET not in page and "data:image/png" not in page
    if isinstance(name, str) and name:
        assert code == 1 and "not shown" in err
    else:
        assert code == 1 and "run.figures[0].files" not in err   # a bad name is a refused file, not a crash


def test_a_warnings_log_path_outside_is_not_linked(tmp_path, capsys, secret):
    root = tmp_path / "results"
    for i, log in enumerate(["/etc/passwd", str(secret[1]), "../../../outside/passwd"]):
        summary = record()
        summary["run"]["warnings"]["log"] = log
        make_run(root, f"quick-{i}", summary)
    code, page, err, tree = render(root, capsys)
    assert code == 1 and err.count("warnings log") == 3
    check_tree(tree, root)
    assert "passwd" not in "".join(el.get("href", "") for el in tree.iter())


def test_symlinked_folders_and_metrics_outside_dir_are_not_followed(tmp_path, capsys, secret):
    root = tmp_path / "results"
    make_run(root, "quick-1", record())
    outside = make_run(tmp_path / "elsewhere", "quick-9", record(experiment="outside-run"))
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "toy-runner" / "quick-2").mkdir()
    (root / "toy-runner" / "quick-2" / "metrics.json").symlink_to(outside / "metrics.json")
    code, page, err, tree = render(root, capsys)
    assert "outside-run" not in page
    assert code == 1 and "leads outside the results folder" in err


def test_a_fifo_named_metrics_json_does_not_hang(tmp_path):
    make_run(tmp_path, "quick-1", record())
    (tmp_path / "toy-runner" / "quick-2").mkdir()
    os.mkfifo(tmp_path / "toy-runner" / "quick-2" / "metrics.json")
    proc = subprocess.run([sys.executable, "-m", "corrpriors", "report", str(tmp_path)], capture_output=True,
                          text=True, timeout=120)          # a blocking open() would hang here
    assert proc.returncode == 1 and "not a regular file" in proc.stderr


def test_a_folder_tree_deeper_than_the_recursion_limit_is_walked(tmp_path, capsys):
    make_run(tmp_path, "quick-1", record())
    deep = str(tmp_path / "deep")
    os.mkdir(deep)
    for _ in range(1200):                       # deeper than Python's default recursion limit
        deep += "/d"
        os.mkdir(deep)
    pathlib.Path(deep, "metrics.json").write_text(json.dumps(record(experiment="the-deep-one")))
    try:
        code, page, err, tree = render(tmp_path, capsys)
    finally:                                    # shutil.rmtree (pytest's clean-up) recurses: remove it here
        os.unlink(pathlib.Path(deep, "metrics.json"))
        while deep != str(tmp_path / "deep"):
            os.rmdir(deep)
            deep = os.path.dirname(deep)
    assert code == 0, err
    assert "the-deep-one" in page and page.count('class="metric"') == 2


def test_hrefs_cannot_become_a_url_scheme(tmp_path, capsys):
    summary = record()
    summary["run"]["figures"] = [{"files": ["toy-error.png", "javascript:alert(1).pdf"], "caption": "c"}]
    folder = make_run(tmp_path, "quick-1", summary)
    (folder / "javascript:alert(1).pdf").write_bytes(b"%PDF-1.4\n")
    out = folder.parent.parent / "page.html"
    code, page, err, tree = render(tmp_path, capsys, "-o", str(out))
    check_tree(tree, tmp_path)
    assert 'href="javascript' not in page and "javascript%3Aalert" in page


# ----------------------------------------------------------------------------- -o


@pytest.mark.parametrize("target", ["metrics.json", "config.json", "warnings.log", "toy-error.png",
                                    "seeds/seed-0.json", "new-file.html"])
def test_output_inside_a_run_folder_is_refused(tmp_path, capsys, target):
    folder = make_run(tmp_path, "quick-1", record())
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    code = main(["report", str(tmp_path), "-o", str(folder / target)])
    err = capsys.readouterr().err
    assert code == 2 and "run folder" in err or "never overwritten" in err
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    assert not (folder / target).exists() or target != "new-file.html"


def test_output_through_a_symlink_or_dotdot_is_refused(tmp_path, capsys):
    folder = make_run(tmp_path, "quick-1", record())
    original = (folder / "metrics.json").read_bytes()
    (tmp_path / "innocent.html").symlink_to(folder / "metrics.json")
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "innocent.html")]) == 2
    sneaky = folder / "seeds" / ".." / "metrics.json"
    assert main(["report", str(tmp_path), "-o", str(sneaky)]) == 2
    assert (folder / "metrics.json").read_bytes() == original
    capsys.readouterr()


def test_an_interrupted_run_folder_without_metrics_is_protected_too(tmp_path, capsys):
    make_run(tmp_path, "quick-1", record())
    interrupted = tmp_path / "toy-runner" / "quick-2"
    (interrupted / "seeds").mkdir(parents=True)
    (interrupted / "config.json").write_text('{"experiment": "toy-runner"}')
    (interrupted / "seeds" / "seed-0.json").write_text("{}")
    for target in ("config.json", "seeds/seed-0.json", "page.html"):
        assert main(["report", str(tmp_path), "-o", str(interrupted / target)]) == 2
    assert (interrupted / "config.json").read_text() == '{"experiment": "toy-runner"}'
    assert (interrupted / "seeds" / "seed-0.json").read_text() == "{}"
    assert not (interrupted / "page.html").exists()
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "toy-runner" / "page.html")]) == 0
    capsys.readouterr()


def test_a_skipped_run_folder_is_still_protected(tmp_path, capsys):
    folder = make_run(tmp_path, "quick-1", None, raw=b"[]")
    assert main(["report", str(tmp_path), "-o", str(folder / "config.json")]) == 2
    assert json.loads((folder / "config.json").read_text())["experiment"] == "toy-runner"
    capsys.readouterr()


# ----------------------------------------------------------------------------- malformed records


def _deep(n: int) -> bytes:
    return b'{"experiment": "x", "config": ' + b"[" * n + b"]" * n + b"}"


def _mutate(path: str, value):
    def apply(summary):
        *head, last = path.split(".")
        block = summary
        for key in head:
            block = block[int(key)] if isinstance(block, list) else block[key]
        if value is KeyError:
            del block[last]
        else:
            block[last] = value
        return summary
    return apply


MALFORMED = {
    "metrics is a list": (_mutate("metrics", []), "metrics: expected an object of metrics, got a list"),
    "x is a string": (_mutate("x", "steps"), "x: expected an object with the x values, got a string"),
    "x values a string": (_mutate("x.values", "0,1,2"), "x.values: expected a list of numbers"),
    "mean shorter than x": (_mutate("metrics.error.methods.a.mean", [1.0, 2.0]),
                            "metrics.error.methods.a.mean: expected 3 numbers (one per x), got a list of 2"),
    "missing mean": (_mutate("metrics.error.methods.a.mean", KeyError), "metrics.error.methods.a.mean: missing"),
    "claims a string": (_mutate("extra.claims", "all hold"), "extra.claims: expected a list of claims"),
    "claim holds a string": (_mutate("extra.claims.0.holds", "yes"), "extra.claims[0].holds: expected true or"),
    "figures a string": (_mutate("run.figures", "toy-error.png"), "run.figures: expected a list of figures"),
    "figure files a string": (_mutate("run.figures.0.files", "toy-error.png"), "run.figures[0].files: expected"),
    "seeds a number": (_mutate("seeds", 5), "seeds: expected a list of seed numbers, got a number 5"),
    "seed a null": (_mutate("seeds", [0, None]), "seeds[1]: expected a non-negative integer, got null"),
    "metrics null": (_mutate("metrics", None), "metrics: expected an object of metrics, got null"),
    "method stats null": (_mutate("metrics.error.methods.a", None), "metrics.error.methods.a: expected an object"),
    "experiment a dict": (_mutate("experiment", {"name": "x"}), "experiment: expected a name, got an object"),
    "experiment missing": (_mutate("experiment", KeyError), "experiment: missing"),
    "run a list": (_mutate("run", []), "run: expected an object, got a list"),
    "notes a dict": (_mutate("extra.notes", {"a": 1}), "extra.notes: expected a list of strings"),
    "warnings counts strings": (_mutate("run.warnings.by_category", {"X": "many"}),
                                "run.warnings.by_category.X: expected a count"),
    "top level a list": (lambda s: [s], "the file: expected a JSON object, got a list"),
}
RAW = {
    "nested 50,000 deep": (_deep(50_000), "nested too deeply"),
    "not JSON": (b"{not json", "not valid JSON"),
    "not UTF-8": (b'{"experiment": "\xff"}', "not UTF-8"),
    "empty file": (b"", "not valid JSON"),
    "a 5,000-digit integer": (b'{"seeds": [' + b"9" * 5000 + b"]}", "not usable JSON"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED) + sorted(RAW))
def test_a_malformed_record_is_skipped_with_its_reason(tmp_path, capsys, case):
    if case in MALFORMED:
        mutate, reason = MALFORMED[case]
        make_run(tmp_path, "quick-bad", mutate(copy.deepcopy(record())))
    else:
        raw, reason = RAW[case]
        make_run(tmp_path, "quick-bad", None, raw=raw)
    make_run(tmp_path, "quick-good", record(experiment="the-good-one"))
    code, page, err, tree = render(tmp_path, capsys)
    assert code == 1, err
    lines = [line for line in err.splitlines() if "skipped" in line]
    assert len(lines) == 1 and "quick-bad" in lines[0] and reason in lines[0], err
    assert "the-good-one" in page and page.count('class="metric"') == 1
    assert 'id="skipped"' in page and reason.split(":")[0] in page
    check_tree(tree, tmp_path)


def test_every_record_malformed_still_writes_the_page_and_exits_1(tmp_path, capsys):
    make_run(tmp_path, "quick-bad", None, raw=b"[]")
    assert main(["report", str(tmp_path)]) == 1
    assert "0 result folder(s), 1 skipped" in capsys.readouterr().out
    assert "1 skipped" in (tmp_path / "report.html").read_text()


def test_nan_and_infinity_read_as_not_available(tmp_path, capsys):
    raw = json.dumps(record()).replace("0.25", "NaN").replace("5.66e-06", "Infinity").encode()
    make_run(tmp_path, "quick-1", None, raw=raw)
    code, page, err, tree = render(tmp_path, capsys)
    assert code == 0, err
    cells = ["".join(td.itertext()) for td in tree.iter("td") if td.get("class") == "num"]
    assert cells.count("n/a") == 1 and "1.00 ± 0.10" in cells     # mean NaN: n/a
    assert not any("nan" in c.lower() or "inf" in c.lower() for c in cells)


# ----------------------------------------------------------------------------- property-based


_TEXT = st.text(alphabet=st.characters(codec="utf-8", categories=None, exclude_categories=()), max_size=12) | \
    st.sampled_from(["<script>", "</td>", "&amp;", '"', "'", "]]>", "<!--", "javascript:x", "../../etc/passwd",
                     "/etc/passwd", "\x00", "\ud800", "\ufffe"])
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_TEXT, children, max_size=4),
    max_leaves=12)
_PATHS = ["experiment", "x", "x.name", "x.values", "seeds", "metrics", "metrics.error", "metrics.error.better",
          "metrics.error.methods", "metrics.error.methods.a", "metrics.error.methods.a.mean",
          "metrics.error.methods.a.std", "metrics.error.methods.a.label", "extra", "extra.claims",
          "extra.claims.0", "extra.claims.0.claim", "extra.claims.0.holds", "extra.notes", "config",
          "config.noise", "run", "run.settings", "run.claims", "run.figures", "run.figures.0",
          "run.figures.0.files", "run.figures.0.caption", "run.warnings", "run.warnings.log",
          "run.warnings.by_category", "run.overrides", "run.resolved"]


def _set(summary, path, value):
    *head, last = path.split(".")
    block = summary
    for key in head:
        block = block[int(key)] if isinstance(block, list) else block[key]
    if isinstance(block, list):
        block[int(last)] = value
    else:
        block[last] = value


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.sampled_from(_PATHS), _JSON), min_size=1, max_size=4))
def test_fuzzed_records_always_give_a_well_formed_safe_page(tmp_path_factory, changes):
    root = tmp_path_factory.mktemp("fuzz")
    summary = record()
    for path, value in changes:
        try:
            _set(summary, path, value)
        except (KeyError, IndexError, TypeError, ValueError):
            pass                                   # an earlier change removed the parent: fine
    make_run(root, "quick-fuzz", summary)
    make_run(root, "quick-good", record(experiment="the-good-one"))
    code = main(["report", str(root)])
    assert code in (0, 1)
    page = (root / "report.html").read_text(encoding="utf-8")
    tree = ET.fromstring(page.split("\n", 1)[1])
    check_tree(tree, root)
    assert "the-good-one" in page
    assert not any(el.tag == "script" for el in tree.iter())


# ----------------------------------------------------------------------------- readability (issue 22)


@pytest.mark.parametrize("mean, std, text", [
    (0.752, 5.66e-06, "0.752 ± <0.001"), (0.1412, 0.0473, "0.141 ± 0.047"), (-0.00251, 0.02944, "-0.003 ± 0.029"),
    (-76.19, 0.1363, "-76.2 ± 0.1"), (0.771, 0.0, "0.771 ± 0"), (0.0, 0.0, "0 ± 0"), (None, 0.1, "n/a"),
    (12345.6, 789.0, "12346 ± 789"), (1.234e6, 5.0e4, "(1.23 ± 0.05)e+06"), (3.0e-5, 1e-9, "(3.00 ± <0.01)e-05"),
    (0.9367, 0.0518, "0.937 ± 0.052"),
])
def test_mean_std_is_rounded_consistently(mean, std, text):
    from corrpriors.runner.report import format_mean_std

    assert format_mean_std(mean, std) == text


def test_the_page_reads_well(tmp_path, capsys):
    summary = record()
    methods = {f"method_{k}_with_a_long_name": {"mean": [0.93671, -0.00251, 0.752], "std": [0.0518, 0.02944, 5.66e-6]}
               for k in range(8)}
    summary["metrics"] = {"normalized_return": {"better": "higher", "methods": methods}}
    summary["config"]["selection"] = "map-em"
    make_run(tmp_path, "quick-1", summary)
    code, page, err, tree = render(tmp_path, capsys)
    assert code == 0, err
    # wide tables are split: no table wider than the budget, every method in some table
    tables = [t for t in tree.iter("table") if t.get("class") == "metric"]
    assert len(tables) >= 2 and sum(len(t.findall("tr")[0]) - 1 for t in tables) == 8
    for t in tables:
        width = sum(max(len("".join(c.itertext())) if c.tag == "td" else min(len("".join(c.itertext())), 14)
                        for c in col) + 3 for col in zip(*[list(r) for r in t.findall("tr")]))
        assert width <= 118 + 3
    cells = [td for td in tree.iter("td") if td.get("class") == "num"]
    assert cells and "0.752 ± <0.001" in {"".join(td.itertext()) for td in cells}
    # numbers never wrap; verdicts have distinct classes; the indicative badge is separate
    assert "td.num { white-space: nowrap" in page
    verdicts = [el for el in tree.iter("span") if el.get("class") in ("met", "notmet")]
    assert {el.get("class") for el in verdicts} == {"met", "notmet"}
    assert ".met { color: #0a6b2d" in page and ".notmet { color: #b00020" in page
    assert sum(1 for el in tree.iter("span") if el.get("class") == "scale indicative") == 2
    # headings and the configuration: no placeholders
    headings = ["".join(h.itertext()) for h in tree.iter("h3")]
    assert "Claim checks" in headings and not any("seed(s);" in h for h in headings)
    assert "given as" not in page and "resolved" not in "".join(tree.itertext()).replace("resolved path", "")
    rows = [[("".join(c.itertext())) for c in tr] for t in tree.iter("table") if t.get("class") == "config"
            for tr in t.findall("tr")]
    assert ["lengthscale", "3.0", "chosen automatically by the run"] in rows
    assert ["noise", "0.1", "set with --set"] in rows and ["grid", "1, 2", ""] in rows
    assert ["selection", "map-em", ""] in rows and ["label", "x", ""] in rows


def test_labels_from_metrics_json_head_the_columns(tmp_path, capsys):
    summary = record()
    summary["metrics"]["error"]["methods"]["a"]["label"] = "Method A (label)"
    summary["methods"] = {"b": {"label": "Method B (table)"}}
    make_run(tmp_path, "quick-1", summary)
    code, page, err, tree = render(tmp_path, capsys)
    heads = {th.get("title"): "".join(th.itertext()) for th in tree.iter("th") if th.get("class") == "method"}
    assert heads == {"a": "Method A (label)", "b": "Method B (table)"}


def test_method_groups_balance_and_fit():
    from corrpriors.runner.report import method_groups

    class M:
        def __init__(self, label):
            self.label = label
    methods = [M("m") for _ in range(8)]
    cells = [["-0.00300 ± 0.02875"] * 3] * 8
    groups = method_groups(methods, cells, x_width=5, budget=118)
    assert [len(g) for g in groups] == [4, 4]
    assert sum(groups, []) == list(range(8))
    assert method_groups(methods[:3], cells[:3], x_width=5) == [[0, 1, 2]]
