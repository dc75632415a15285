"""Find everything a built HTML site would load from the network (issue 22: the docs work offline).

``python tests/offline_html.py DIR`` scans every ``.html`` and ``.css`` file under ``DIR`` and exits
with status 1, listing them, if any page loads a script, a style sheet, an image, a font or a
frame from another host (``http://``, ``https://`` or ``//``). Links a reader may follow
(``<a href>``) are not loads and are allowed. CI runs it on ``docs/_build/html`` after the build.
"""

from __future__ import annotations

import pathlib
import re
import sys
from html.parser import HTMLParser

#: (tag, attribute) pairs whose URL the browser fetches when it shows the page.
LOADING = {("script", "src"), ("img", "src"), ("iframe", "src"), ("source", "src"), ("video", "src"),
           ("audio", "src"), ("embed", "src"), ("object", "data"), ("input", "src"), ("track", "src"),
           ("img", "srcset"), ("source", "srcset"), ("video", "poster")}
#: ``<link rel=...>`` values that fetch their ``href``.
LOADING_LINKS = {"stylesheet", "preload", "modulepreload", "icon", "shortcut", "apple-touch-icon", "manifest",
                 "prefetch", "preconnect", "dns-prefetch"}
_EXTERNAL = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)
_CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])\s*((?:https?:)?//[^'")\s]+)""", re.IGNORECASE)


class _Loads(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._style = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        values = {k.lower(): (v or "") for k, v in attrs}
        for (t, attr) in LOADING:
            if tag == t and attr in values:
                for url in values[attr].split(","):
                    if _EXTERNAL.match(url.strip().split(" ")[0] if url.strip() else ""):
                        self.found.append(f"<{tag} {attr}={url.strip()}>")
        if tag == "link" and set(values.get("rel", "").lower().split()) & LOADING_LINKS:
            if _EXTERNAL.match(values.get("href", "")):
                self.found.append(f"<link rel={values.get('rel')} href={values['href']}>")
        self.found += [f"style attribute: {u}" for u in _CSS_URL.findall(values.get("style", ""))]
        self._style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._style = False

    def handle_data(self, data: str) -> None:
        if self._style:  # any URL of another host in a style block (url(), @import, or markup that is no markup)
            self.found += [f"<style>: {u}" for u in re.findall(r"(?:https?:)?//[^\s'\")<>]+", data)]


def external_loads(text: str, kind: str = "html") -> list[str]:
    """What a page (``kind="html"``) or a style sheet (``"css"``) would fetch from another host."""
    if kind == "css":
        return _CSS_URL.findall(text)
    parser = _Loads()
    parser.feed(text)
    parser.close()
    return parser.found


def scan(root: pathlib.Path) -> dict[str, list[str]]:
    """``{file: [loads]}`` of every ``.html`` and ``.css`` file under ``root`` that loads from the network."""
    out = {}
    for path in sorted(pathlib.Path(root).rglob("*")):
        if path.suffix not in (".html", ".css") or not path.is_file():
            continue
        found = external_loads(path.read_text(errors="replace"), path.suffix[1:])
        if found:
            out[str(path.relative_to(root))] = found
    return out


def main(argv: list[str]) -> int:
    """Scan ``argv[0]``; print what loads from the network; exit 1 if anything does, 2 if nothing was built."""
    root = pathlib.Path(argv[0] if argv else "docs/_build/html")
    if not any(root.rglob("*.html")):
        print(f"offline check: no HTML under {root}", file=sys.stderr)
        return 2
    found = scan(root)
    for path, loads in found.items():
        for load in loads:
            print(f"{path}: loads {load}", file=sys.stderr)
    if found:  # silent when clean, so that CI's last lines stay the test summary
        print(f"offline check: {len(found)} files load from the network", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
