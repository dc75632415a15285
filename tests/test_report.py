"""``corrpriors report DIR``: one self-contained, valid HTML page of a results folder."""

from __future__ import annotations

import html.parser
import re
import xml.etree.ElementTree as ET

import pytest

import toy_experiment as toy
from corrpriors.cli import main
from corrpriors.runner import run_experiment

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class StrictChecker(html.parser.HTMLParser):
    """Balanced tags (void elements excepted), unique ids, images with alt text, and every
    ``src``/``href`` collected."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.ids, self.refs, self.doctype = [], [], set(), [], None

    def handle_decl(self, decl):
        self.doctype = decl

    def handle_starttag(self, tag, attrs):
        names = [k for k, _ in attrs]
        if len(names) != len(set(names)):
            self.errors.append(f"<{tag}> repeats an attribute")
        a = dict(attrs)
        if "id" in a:
            if a["id"] in self.ids:
                self.errors.append(f"duplicate id {a['id']}")
            self.ids.add(a["id"])
        if tag == "img" and not a.get("alt"):
            self.errors.append("<img> without alt text")
        self.refs += [a[k] for k in ("src", "href") if k in a]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else 'nothing'}>")
        else:
            self.stack.pop()


pytestmark = pytest.mark.usefixtures("toy_registered")   # (conftest)


def test_report_is_valid_self_contained_and_complete(tmp_path, capsys):
    out = tmp_path / "results"
    kw = dict(jobs=1, out=out, progress=False, echo=None)
    quick = run_experiment(toy.NAME, quick=True, **kw)
    full = run_experiment(toy.NAME, overrides={"noise": "0.2"}, **kw)
    assert main(["report", str(out)]) == 0
    page_path = out / "report.html"
    assert f"{page_path}: 2 result folder(s)" in capsys.readouterr().out
    page = page_path.read_text(encoding="utf-8")
    assert "http://" not in page and "https://" not in page

    checker = StrictChecker()
    checker.feed(page)
    checker.close()
    assert checker.doctype == "DOCTYPE html" and not checker.errors and not checker.stack
    root = ET.fromstring(page.split("\n", 1)[1])      # also well-formed XML (after the doctype)
    assert root.tag.endswith("html") and root.get("lang") == "en"

    # no network resources; every reference is embedded, an anchor on the page, or an existing file
    for ref in checker.refs:
        assert not re.match(r"^[a-z]+://", ref) and not ref.startswith("//"), ref
        if ref.startswith("data:image/png;base64,"):
            continue
        if ref.startswith("#"):
            assert ref[1:] in checker.ids
            continue
        assert (page_path.parent / ref).exists(), ref
    for report in (quick, full):
        rel = report.out_dir.relative_to(out).as_posix()
        assert f'href="{rel}/metrics.json"' in page
        for fig in report.saved_figures:                # every figure, embedded, with its caption
            assert fig.caption in page and f'href="{rel}/{fig.paths[1].name}"' in page
        assert f'href="{rel}/warnings.log"' in page
    assert page.count("data:image/png;base64,") == 4
    # every metric table with every x value; claims with their seed counts and status; the configuration
    assert page.count("is better): mean ± std over seeds</h3>") == 4
    assert page.count("<h3>Claim checks</h3>") == 2
    assert "Verdicts are indicative: 2 seeds at quick settings;" in page
    assert "Verdicts are indicative: 4 seeds at custom settings;" in page
    assert '<span class="met">met</span> <span class="scale indicative">indicative</span>' in page
    assert "a beats b" in page
    assert ('<td class="text"><code>noise</code></td><td class="text value">0.2</td>'
            '<td class="text">set with --set</td>') in page
    assert ('<td class="text"><code>lengthscale</code></td><td class="text value">3.0</td>'
            '<td class="text">chosen automatically by the run</td>') in page
    assert "given as" not in page


def test_report_of_a_folder_without_results_is_an_error(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "no metrics.json under" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert not (tmp_path / "report.html").exists()
