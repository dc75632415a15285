"""The documentation works offline (issue 22): no built page loads anything from the network.

CI builds the docs after the test suite and runs ``tests/offline_html.py`` on the result; here the
checker is tested on the pages that broke the rule (sphinx-gallery's ``sg_execution_times``), the
docs configuration is checked not to write them, and a site built locally (``docs/_build/html``,
if present) is scanned.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from offline_html import external_loads, main, scan

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"

#: What sphinx-gallery 0.22 writes into sg_execution_times.html (abridged).
SG_EXECUTION_TIMES = """<html><head><link rel="stylesheet" href="_static/pydata.css"></head><body>
<div class="container"><style scoped>
<link href="https://cdnjs.cloudflare.com/ajax/libs/twitter-bootstrap/5.3.0/css/bootstrap.min.css" rel="stylesheet" />
</style>
<script src="https://code.jquery.com/jquery-3.7.0.js"></script>
<script src="https://cdn.datatables.net/1.13.6/js/jquery.dataTables.min.js"></script>
<a href="https://example.org/paper">a link is not a load</a></div></body></html>"""


def test_the_checker_finds_every_kind_of_load():
    found = external_loads(SG_EXECUTION_TIMES)
    assert "<script src=https://code.jquery.com/jquery-3.7.0.js>" in found
    assert "<script src=https://cdn.datatables.net/1.13.6/js/jquery.dataTables.min.js>" in found
    assert any("bootstrap.min.css" in f for f in found)
    assert not any("example.org" in f for f in found)
    assert external_loads('<img src="//cdn.example/x.png"><link rel="icon" href="http://x/f.ico">') == [
        "<img src=//cdn.example/x.png>", "<link rel=icon href=http://x/f.ico>"]
    assert external_loads("@font-face { src: url('https://fonts.example/a.woff2') }", "css") == [
        "https://fonts.example/a.woff2"]
    assert external_loads('<script src="_static/local.js"></script><img src="data:image/png;base64,AA">') == []


def test_the_checker_fails_a_site_that_loads_and_passes_one_that_does_not(tmp_path, capsys):
    (tmp_path / "index.html").write_text("<html><body><p>offline</p></body></html>")
    assert main([str(tmp_path)]) == 0 and capsys.readouterr().err == ""
    (tmp_path / "sg_execution_times.html").write_text(SG_EXECUTION_TIMES)
    assert main([str(tmp_path)]) == 1
    assert "sg_execution_times.html: loads <script src=https://code.jquery.com" in capsys.readouterr().err
    assert main([str(tmp_path / "nothing")]) == 2


def test_the_docs_do_not_write_the_timing_pages():
    tree = ast.parse((DOCS / "conf.py").read_text())
    conf = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id in (
                "sphinx_gallery_conf", "exclude_patterns"):
            conf[node.targets[0].id] = ast.literal_eval(node.value)
    assert conf["sphinx_gallery_conf"]["write_computation_times"] is False
    assert {"sg_execution_times.rst", "**/sg_execution_times.rst"} <= set(conf["exclude_patterns"])
    assert "python tests/offline_html.py docs/_build/html" in (DOCS.parent / ".ci" / "run").read_text()


def test_a_locally_built_site_loads_nothing_from_the_network():
    built = DOCS / "_build" / "html"
    if not (built / "index.html").is_file():
        pytest.skip("docs not built here (CI builds them after the tests and runs tests/offline_html.py)")
    assert scan(built) == {}
