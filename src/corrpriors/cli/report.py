"""``corrpriors report DIR``: the command line of :mod:`corrpriors.runner.report`."""

from __future__ import annotations

import argparse
import pathlib
import sys

from ..runner.report import write_report


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``report`` arguments to ``parser``."""
    parser.description = (
        "Write one self-contained HTML page of a results folder (the --out of corrpriors reproduce): "
        "every figure, every metric table, the claim checks with their seed counts and the configuration."
    )
    parser.add_argument("directory", metavar="DIR", help="results folder (searched for metrics.json at any depth)")
    parser.add_argument("--output", "-o", default=None, help="the HTML file to write (default: DIR/report.html)")


def run(args: argparse.Namespace) -> int:
    """Write the report; return the exit code (2: no results or an unusable path)."""
    root = pathlib.Path(args.directory)
    if not root.is_dir():
        print(f"corrpriors report: error: {root} is not a directory", file=sys.stderr)
        return 2
    output = pathlib.Path(args.output) if args.output else root / "report.html"
    try:
        path, n = write_report(root, output)
    except ValueError as exc:
        print(f"corrpriors report: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"corrpriors report: error: cannot write {output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"{path}: {n} result folder(s)")
    return 0


__all__ = ["configure", "run"]
