"""Arguments and messages shared by the sub-commands."""

from __future__ import annotations

import argparse
import sys

from ..runner._run import BACKENDS


def error(prog: str, message: str) -> None:
    """Print ``prog: error: message`` on stderr (one line)."""
    print(f"{prog}: error: {message}", file=sys.stderr)


def add_execution_arguments(parser: argparse.ArgumentParser) -> None:
    """Add how seeds are run and what is kept: --jobs, --backend, --scheduler, --resume, --progress, --plot."""
    parser.add_argument("--jobs", "-j", type=int, default=-1,
                        help="parallel workers, one seed each (default -1: all cores)")
    parser.add_argument("--backend", choices=BACKENDS, default="loky",
                        help="loky (joblib, default), dask or ray (optional extras: pip install 'corrpriors[dist]')")
    parser.add_argument("--scheduler", default=None,
                        help="cluster address: tcp://host:8786 for dask (default: a local cluster), "
                             "ray://host:10001 or auto for ray (needs --backend dask or ray)")
    parser.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                        help="skip seeds already on disk with the same configuration (default: on)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                        help="show a progress bar (default: on)")
    parser.add_argument("--plot", action=argparse.BooleanOptionalAction, default=True,
                        help="draw the figures (default: on; --no-plot writes metrics.json only)")


__all__ = ["add_execution_arguments", "error"]
