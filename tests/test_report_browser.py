"""The report in a real browser (headless Chromium): no horizontal scrolling at 1280 pixels.

Skipped where no Chromium is installed (``apt-get install chromium``). The page is copied with a
one-line script that writes the widest extent of any element (inner scrolling boxes included) into
the title, which ``--dump-dom`` prints.
"""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest

from corrpriors.cli import main
from test_report_safety import make_run, record

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _scroll_width(page: pathlib.Path, width: int = 1280) -> int:
    probe = page.with_name("probe.html")
    text = page.read_text(encoding="utf-8")
    # the widest extent of any element's content, inner scrolling boxes included
    script = ("<script>window.addEventListener('load', function () { var w = document.documentElement.scrollWidth;"
              " document.querySelectorAll('body *').forEach(function (el) {"
              " w = Math.max(w, Math.ceil(el.getBoundingClientRect().left + el.scrollWidth)); });"
              " document.title = 'W=' + w; });</script>")
    probe.write_text(text.replace("</body>", script + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        out = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             f"--window-size={width},2000", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
            capture_output=True, text=True, timeout=120)
    found = re.search(r"<title>W=(\d+)</title>", out.stdout)
    assert found, out.stderr[-2000:]
    return int(found.group(1))


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium to render the page")
def test_no_horizontal_scrolling_at_1280_pixels(tmp_path, capsys):
    summary = record()
    labels = ["PG, relative moves, sampling", "PG, relative moves, mean", "PG, absolute next states, sampling",
              "PG, absolute next states, mean", "Dirichlet α=1e-3, sampling", "Dirichlet α=1e-3, mean",
              "Dirichlet α=1, sampling", "Dirichlet α=1, mean"]
    methods = {f"method_{k}": {"mean": [-0.00300, 0.93671, -76.19], "std": [0.02875, 0.0518, 5.66e-6],
                               "label": labels[k]} for k in range(8)}
    summary["metrics"] = {"normalized_return": {"better": "higher", "methods": methods},
                          "raw_names": {"better": "higher", "methods": {
                              f"dirichlet_uniform_sampling_{k}": {"mean": [1.0, 2.0, 3.0], "std": [0.1] * 3}
                              for k in range(8)}}}
    summary["config"]["methods"] = [f"pg_absolute_sampling_{k}" for k in range(40)]
    summary["config"]["env_kwargs"] = json.dumps({"desc": ["SFFFFFFFFFFFFFFFFFFFFFFFF" * 4] * 20})
    summary["extra"]["notes"] = ["x" * 400]
    make_run(tmp_path, "quick-1", summary)
    assert main(["report", str(tmp_path)]) == 0
    capsys.readouterr()
    assert _scroll_width(tmp_path / "report.html") <= 1280
