"""``corrpriors fit``: the command line of :mod:`corrpriors.runner.fit`.

Parses the options into a :class:`~corrpriors.runner.fit.FitOptions`, runs
:func:`~corrpriors.runner.fit.fit_files` and turns its errors into one line on stderr and an exit
status.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from .._memory import format_bytes
from ..runner._ranges import number_from_text
from ..runner.fit import (
    KERNELS,
    MAX_NPY_TABLE_BYTES,
    MAX_TEXT_TABLE_BYTES,
    OUTPUTS,
    FitFailure,
    FitOptions,
    _one_line,
    _say,
    fit_files,
)
from ._common import out_dir


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``fit`` sub-command's arguments (every default is stated in ``--help``)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = textwrap.fill(
        "Fit a correlated multinomial model (a Gaussian-process prior over stick-breaking "
        "logits, Alt et al. 2019) to a table of counts, one row per covariate.", width=78)
    parser.epilog = _epilog()
    parser.error = _one_line_error.__get__(parser)  # type: ignore[method-assign]
    _add_input_arguments(parser)
    _add_model_arguments(parser)
    _add_output_arguments(parser)


def _epilog() -> str:
    def fill(text: str, first: str = "", rest: str = "") -> str:
        return textwrap.fill(text, width=78, initial_indent=first, subsequent_indent=rest)

    width = max(map(len, OUTPUTS)) + 2  # every name, then at least two spaces
    files = "\n".join(fill(text, f"  {name:<{width}}", " " * (width + 2))
                      for name, text in OUTPUTS.items())
    notes = [
        "An input that is, or links to, one of these files in --out is refused before fitting.",
        "--out holds one run: manifest.json records its configuration (the inputs' resolved "
        "paths and every option but --out, --overwrite, --verbose and --quiet) and its files. "
        "A re-run of the same configuration replaces them; before fitting, a folder holding "
        "these files from another configuration, changed since, or not written by corrpriors "
        "fit (no manifest.json) is refused unless --overwrite is given, which also removes "
        "such a file that this run does not write (predictions.csv without --predict-at). "
        "Other files there are never touched.",
        "Input tables: .csv (comma-separated) or .tsv/.tab (tab-separated) UTF-8 text, or .npy "
        "(numeric, no pickles). In text, empty lines and lines starting with '#' are skipped; "
        "the first row is a header when none of its fields is a number; every other row "
        "holds numbers only, written in decimal (-1.5, .5, 2e-3; no '_' or thousands "
        "separators, nan or inf). A blank field, a first row mixing names and numbers, or rows "
        "of different lengths are errors naming the file and line. Inputs must be regular "
        "files (a named pipe or a device such as /dev/zero is refused before it is opened) of "
        f"at most {format_bytes(MAX_TEXT_TABLE_BYTES)} of text or "
        f"{format_bytes(MAX_NPY_TABLE_BYTES)} of .npy.",
        "Exit status: 0 done; 2 bad input, option or output location (one line on stderr); "
        "1 the fit or the writing failed; 130 interrupted. Only 0 writes anything."]
    return ("output files (written into --out together: all of them, or none on any error):\n"
            + files + "\n\n" + "\n".join(fill(n) for n in notes) + "\n")


def _one_line_error(self: argparse.ArgumentParser, message: str) -> NoReturn:
    self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _int_at_least(low: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = number_from_text(text, int)   # ASCII digits only, as reproduce's options
        except ValueError:
            value = low - 1
        if value < low:
            kind = "a positive" if low == 1 else "a non-negative"
            raise argparse.ArgumentTypeError(f"expected {kind} integer, got {text!r}")
        return value

    return parse


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (np.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite positive number, got {text!r}")
    return value


def _out_dir(text: str) -> Path:
    return Path(out_dir(text))


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def _add_input_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--counts", type=Path, default=None, metavar="FILE",
                        help="non-negative integer counts, C rows (covariates) x K >= 2 columns "
                             "(categories). Default: the shipped example (a 5x5 grid random walk, "
                             "K = 5) with its coordinates")
    loc = parser.add_mutually_exclusive_group()
    loc.add_argument("--coords", type=Path, default=None, metavar="FILE",
                     help="covariate coordinates, C rows x D columns. Required with --counts "
                          "unless --distances is given. Default: the example's coordinates")
    loc.add_argument("--distances", type=Path, default=None, metavar="FILE",
                     help="pairwise covariate distances, C x C (e.g. shortest-path lengths). "
                          "Default: none")
    parser.add_argument("--predict-at", type=Path, default=None, metavar="FILE",
                        help="coordinates of new covariates, M rows x D columns (needs "
                             "--coords): their predicted probabilities go to predictions.csv. "
                             "Default: none")


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prior", choices=("kernel", "gmrf"), default="kernel",
                        help="kernel: a dense covariance k(d) of the coordinates or distances "
                             "(memory grows with C^2: up to a few thousand rows); gmrf: a "
                             "sparse Gaussian Markov random field on the graph of --coords "
                             "(integer coordinates: the grid of the occupied cells, else the 2D "
                             "nearest neighbours), a Matern-like prior of range --lengthscale "
                             "(correlation 0.14 at that distance; up to ~300 graph spacings) for up to "
                             "~10^5 rows; no "
                             "--learn-lengthscale or --predict-at. Default: %(default)s")
    parser.add_argument("--kernel", choices=tuple(KERNELS), default="se",
                        help="covariance function of the distance d: se = exp(-d^2/l^2) (the "
                             "paper's), exp = exp(-d/l), matern32, matern52. Default: %(default)s")
    parser.add_argument("--lengthscale", type=_positive_float, default=1.0, metavar="L",
                        help="kernel length scale l, in the units of the coordinates (the "
                             "starting value with --learn-lengthscale). Default: %(default)s")
    parser.add_argument("--lengthscale-bounds", type=_positive_float, nargs=2, default=(1e-2, 1e3),
                        metavar=("LOW", "HIGH"),
                        help="range searched by --learn-lengthscale (ignored without it). "
                             "Default: 0.01 1000")
    parser.add_argument("--learn-lengthscale", action="store_true",
                        help="learn l (L-BFGS-B M-step on the ELBO). Default: off")
    parser.add_argument("--scale", type=_positive_float, default=1.0, metavar="THETA",
                        help="prior covariance scale theta (the starting value with "
                             "--learn-scale). Default: %(default)s")
    parser.add_argument("--learn-scale", action="store_true",
                        help="learn theta by variational EM. Default: off")
    parser.add_argument("--scale-prior", type=_positive_float, nargs=2, default=None,
                        metavar=("SHAPE", "RATE"),
                        help="Gamma hyper-prior on theta (MAP-EM with --learn-scale). "
                             "Default: none")
    parser.add_argument("--learn-mean", choices=("none", "constant"), default="none",
                        help="none: the prior mean that makes all categories equally likely; "
                             "constant: learn one prior mean per stick. Default: %(default)s")
    parser.add_argument("--max-iter", type=_int_at_least(1), default=1000, metavar="N",
                        help="cap on the CAVI iterations. Default: %(default)s")
    parser.add_argument("--tol", type=_positive_float, default=1e-8,
                        help="relative change of the objective that counts as converged. "
                             "Default: %(default)g")


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--method", choices=("plugin", "mc"), default="plugin",
                        help="probabilities written to probs.csv: plugin = pi(E[psi]) (the "
                             "paper's), mc = E[pi(psi)] by Monte Carlo. Default: %(default)s")
    parser.add_argument("--uncertainty", action="store_true",
                        help="also write the posterior standard deviations and credible-interval "
                             "bounds of the probabilities (see --interval-method). Default: off")
    parser.add_argument("--interval-method", choices=("calibrated", "vi", "gibbs"),
                        default="calibrated",
                        help="where --uncertainty's numbers come from: calibrated = expectation "
                             "propagation with tilted marginals, integrated over the learned "
                             "scale/length scale (covers at its level in simulation); vi = the "
                             "mean-field q of the fit (too narrow: 90%% intervals cover .81-.88); "
                             "gibbs = the Polya-Gamma Gibbs sampler (exact, slow). "
                             "Default: %(default)s")
    parser.add_argument("--level", type=_probability, default=0.9, metavar="P",
                        help="posterior mass of the --uncertainty intervals, in (0, 1). "
                             "Default: %(default)s")
    parser.add_argument("--samples", type=_int_at_least(2), default=4000, metavar="N",
                        help="Monte Carlo draws for --uncertainty and --method mc. "
                             "Default: %(default)s")
    parser.add_argument("--seed", type=_int_at_least(0), default=0,
                        help="seed of those draws: the same seed and inputs give the same "
                             "numbers (recorded in summary.json). Default: %(default)s")
    parser.add_argument("--out", type=_out_dir, required=True, metavar="DIR",
                        help="output directory (created if missing); see the files below")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the files below in --out even when they hold another "
                             "configuration's results or were not written by corrpriors fit "
                             "(inputs are still never overwritten). Default: off")
    talk = parser.add_mutually_exclusive_group()
    talk.add_argument("--verbose", "-v", action="store_true",
                      help="progress of every iteration (also when not on a terminal). "
                           "Default: off")
    talk.add_argument("--quiet", "-q", action="store_true",
                      help="print errors and warnings only (no progress, no closing line). "
                           "Default: off")


def run(args: argparse.Namespace) -> int:
    """Run ``corrpriors fit``; return the exit status (messages on stderr, one line each).

    0: done. 2: bad input, option or output location. 1: the fit or the writing failed.
    130: interrupted. In every case but 0 nothing has been written.
    """
    from numpy.linalg import LinAlgError

    try:
        return fit_files(options_from(args))
    except KeyboardInterrupt:
        _say("interrupted; nothing written")
        return 130
    except (FitFailure, LinAlgError, ArithmeticError) as exc:
        _say(f"error: {_one_line(exc)}")
        return 1
    except (ValueError, TypeError) as exc:  # UsageError and the library's input validation
        _say(f"error: {_one_line(exc)}")
        return 2


def options_from(args: argparse.Namespace) -> FitOptions:
    """The :class:`FitOptions` of parsed command-line arguments."""
    fields = FitOptions.__dataclass_fields__
    values = {name: getattr(args, name) for name in fields if hasattr(args, name)}
    for name in ("lengthscale_bounds", "scale_prior"):
        if values.get(name) is not None:
            values[name] = tuple(values[name])
    return FitOptions(**values)


__all__ = ["configure", "options_from", "run"]
