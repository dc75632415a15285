"""Arguments and messages shared by the sub-commands."""

from __future__ import annotations

import argparse
import sys

from ..runner._ranges import number_from_text
from ..runner._run import BACKENDS


def error(prog: str, message: str) -> None:
    """Print ``prog: error: message`` on stderr (one line)."""
    print(f"{prog}: error: {message}", file=sys.stderr)


def integer(text: str) -> int:
    """The ``type`` of an integer option (``--jobs``, ``--n-seeds``): ASCII digits only, as ``--set``
    and ``--seeds`` (``int`` also reads "٢", "1_0" and " 2").
    """
    try:
        return number_from_text(text, int)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, got {text!r}") from None


def out_dir(text: str) -> str:
    """The ``type`` of ``--out DIR``: refuses an empty name, which would write into the current
    directory (``--out .`` says that).
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a directory name, got {text!r} (say . for "
                                         f"the current directory)")
    return text


def add_execution_arguments(parser: argparse.ArgumentParser) -> None:
    """Add how seeds are run and what is kept: --jobs, --backend, --scheduler, --resume, --progress, --plot."""
    parser.add_argument("--jobs", "-j", type=integer, default=-1,
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


__all__ = ["add_execution_arguments", "error", "integer", "out_dir"]
