"""``corrpriors report DIR``: the command line of :mod:`corrpriors.runner.report`."""

from __future__ import annotations

import argparse
import pathlib
import sys

from ..runner._report_input import visible
from ..runner.report import write_report

PROG = "corrpriors report"


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``report`` arguments to ``parser``."""
    parser.description = (
        "Write one self-contained HTML page of a results folder (the --out of corrpriors reproduce): "
        "every figure, every metric table, the claim checks with their seed counts and the configuration. "
        "Everything under DIR is treated as untrusted: only regular files inside DIR are embedded or "
        "linked, and a malformed metrics.json is skipped with its reason. Exit status: 0 every result "
        "folder shown, 1 some skipped or some files refused (the page is written), 2 nothing written."
    )
    parser.add_argument("directory", metavar="DIR", help="results folder (searched for metrics.json at any depth)")
    parser.add_argument("--output", "-o", default=None,
                        help="the HTML file to write (default: DIR/report.html); never a file the report "
                             "reads nor a path inside a run folder")


def run(args: argparse.Namespace) -> int:
    """Write the report; return the exit code (1: some folders skipped; 2: nothing written)."""
    root = pathlib.Path(args.directory)
    if not root.is_dir():
        print(f"{PROG}: error: {visible(root)} is not a directory", file=sys.stderr)
        return 2
    output = pathlib.Path(args.output) if args.output else root / "report.html"
    try:
        result = write_report(root, output)
    except ValueError as exc:
        print(f"{PROG}: error: {visible(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: error: cannot write {visible(output)}: {visible(exc.strerror or exc)}", file=sys.stderr)
        return 2
    # every folder name, key and reason comes from the results folder: printed with its
    # control characters made visible, so none can drive the terminal
    for skip in result.skipped:
        print(f"{PROG}: skipped {visible(skip.path)}: {visible(skip.reason)}", file=sys.stderr)
    for what in result.refused:
        print(f"{PROG}: not shown: {visible(what)}", file=sys.stderr)
    extra = f", {len(result.skipped)} skipped" if result.skipped else ""
    print(f"{visible(result.path)}: {result.n_shown} result folder(s){extra}")
    return 1 if result.skipped or result.refused else 0


__all__ = ["configure", "run"]
