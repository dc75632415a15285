"""The work of ``corrpriors fit``: fit a correlated multinomial model to a table of counts.

Reads a (C, K) count table and the covariates' coordinates or distances (CSV, TSV or ``.npy``),
fits :class:`~corrpriors.core.model.CorrelatedMultinomial` on a stationary kernel and writes the
files of :data:`OUTPUTS` into ``--out``, all of them or none. Without ``--counts`` the shipped
example (a 5x5 grid random walk) is used together with its coordinates.

``--out`` holds one run. Its ``manifest.json`` records the run's configuration (the inputs'
resolved paths and every option that shapes the results) and every file written with its
SHA-256. A run replaces the outputs in ``--out`` only when they are those of the same
configuration, unchanged since; a folder holding output-named files that corrpriors did not
write (no manifest, a file changed or not listed) or another configuration's results is
refused before fitting, unless ``--overwrite`` is given.

Adding an optional output takes three steps: its name and description in :data:`OUTPUTS`, its
input file (if any) in :func:`_input_files`, and its bytes in :func:`_build_outputs`; the checks
(no input overwritten, output location usable) and the all-or-nothing write cover it then.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .._fileio import NotReadable, TooLarge, check_regular, open_regular, read_regular
from .._memory import format_bytes
from ._text_tables import TableError, parse_text_table

KERNELS = {"se": "SquaredExponential", "exp": "Exponential", "matern32": "Matern32",
           "matern52": "Matern52"}

#: Every file ``fit`` can write into ``--out``, with what it holds.
OUTPUTS = {
    "probs.csv": "one row per covariate: 'row' (0-based data row of --counts), the K posterior "
                 "probabilities (columns named by the header of --counts, else p1..pK) and, with "
                 "--uncertainty, their posterior standard deviations (<name>_sd) and the bounds "
                 "of their central --level credible intervals (<name>_lower, <name>_upper), all "
                 "by --interval-method",
    "psi.npz": "psi_mean, psi_var: arrays of shape (C, K-1), posterior means and variances of "
               "the stick-breaking logits psi",
    "predictions.csv": "with --predict-at: one row per new covariate, 'row' (0-based row of "
                       "--predict-at) and the K predicted probabilities (the GP conditional of "
                       "psi given the fit) and, with --uncertainty, their standard deviations and "
                       "interval bounds as in probs.csv",
    "summary.json": "inputs, options, ELBO, iterations, convergence, learned scale and kernel "
                    "hyper-parameters, the diagonal jitter and the warnings",
    "manifest.json": "the configuration of this run (inputs, options) and its files (name, "
                     "bytes, SHA-256), by which a later run into --out knows them (see below)",
}

#: Delimiter of every text table suffix.
TEXT_DELIMITERS = {".csv": ",", ".tsv": "\t", ".tab": "\t"}
TABLE_SUFFIXES = (*TEXT_DELIMITERS, ".npy")

#: Largest text table read (256 MiB): text is parsed field by field, with 12-25 times its size in
#: memory (tracemalloc, 8.6 MiB of 6-digit decimals and 2.4 MiB of small counts); a 4,000 x 4,000
#: distance matrix in 16-character fields fits.
MAX_TEXT_TABLE_BYTES = 256 * 2**20

#: Largest ``manifest.json`` of an earlier run read from ``--out`` (a larger one is not ours).
MAX_MANIFEST_BYTES = 16 * 2**20

#: Largest ``.npy`` table read (2 GiB, a 16,384 x 16,384 float64 distance matrix): it is loaded
#: as it is.
MAX_NPY_TABLE_BYTES = 2 * 2**30

#: Seconds between two progress updates on a terminal.
PROGRESS_INTERVAL = 0.25

#: A fit whose first iteration, times the iterations it may well need, exceeds this many
#: seconds says at once how long --max-iter iterations would take.
ESTIMATE_FROM = 60.0

#: Iterations a fit may well need: the joint step took at most 88 on the 41 tables of
#: benchmarks/README.md (plain fits fewer). A bound by --max-iter alone fired on the shipped
#: example (0.07-0.1 s first iteration x 1000) whenever the machine was loaded.
LIKELY_ITERATIONS = 100

#: The starting jitter of ``jittered_covariance`` (relative to the mean diagonal): a covariance
#: that needs no more than this is an ordinary smooth-kernel matrix, not a problem to report.


class UsageError(ValueError):
    """A bad command line, input file or output location (one line, exit status 2)."""


# ------------------------------------------------------------------------------------ running
class FitFailure(RuntimeError):
    """The fit or the writing failed on valid input (one line, exit status 1)."""


def _say(text: str) -> None:
    print(f"corrpriors fit: {text}", file=sys.stderr, flush=True)


def _one_line(exc: BaseException | warnings.WarningMessage | str) -> str:
    return " ".join(str(exc).split())


@dataclass(frozen=True)
class FitOptions:
    """Everything ``corrpriors fit`` was asked to do (the command's options, parsed).

    The fields are those of the command line (``corrpriors fit --help`` documents each);
    paths are ``pathlib.Path`` or ``None``.
    """

    out: Path
    counts: Path | None = None
    coords: Path | None = None
    distances: Path | None = None
    predict_at: Path | None = None
    prior: str = "kernel"
    kernel: str = "se"
    lengthscale: float = 1.0
    lengthscale_bounds: tuple[float, float] = (1e-2, 1e3)
    learn_lengthscale: bool = False
    scale: float = 1.0
    learn_scale: bool = False
    scale_prior: tuple[float, float] | None = None
    learn_mean: str = "none"
    max_iter: int = 1000
    tol: float = 1e-8
    method: str = "plugin"
    uncertainty: bool = False
    interval_method: str = "calibrated"
    level: float = 0.9
    samples: int = 4000
    seed: int = 0
    verbose: bool = False
    quiet: bool = False
    overwrite: bool = False


def fit_files(args: FitOptions) -> int:
    """Fit the model to the files named in ``args`` and write every output, or nothing.

    Raises
    ------
    UsageError
        Bad input, option or output location (nothing read is written back).
    FitFailure, numpy.linalg.LinAlgError, ArithmeticError
        The fit or the writing failed on valid input.
    """
    start = time.monotonic()
    if not str(args.out).strip():
        raise UsageError("--out: expected a directory, got an empty name (the results would go "
                         "into the current directory; say --out . for that)")
    inputs = _input_files(args)
    out = Path(args.out)
    _check_no_input_is_output(inputs, out)
    for option, path in inputs.items():      # before any is opened, or --out touched
        _check_input_file(path, option)
    _check_output_location(out)
    config = _configuration(args, inputs)
    _check_earlier_results(out, config, args.overwrite)
    data = _load_inputs(inputs, args)
    model, messages = _fit(args, data)
    files = _build_outputs(model, args, data, inputs, messages, config, start)
    _check_earlier_results(out, config, args.overwrite)  # no other run wrote there meanwhile
    stale = [name for name in OUTPUTS if name not in files and os.path.lexists(out / name)]
    _write(out, files, stale)
    if not args.quiet:
        state = ("converged" if model.converged_
                 else f"NOT converged: --max-iter {args.max_iter} reached"
                 if model.n_iter_ >= args.max_iter else "NOT converged: stopped, see the warning")
        removed = (f"; removed {', '.join(stale)} of an earlier run" if stale else "")
        print(f"fitted C={data.counts.shape[0]} covariates, K={data.counts.shape[1]} categories "
              f"in {model.n_iter_} iterations ({state})\nELBO {model.elbo_:.6g}; "
              f"wrote {', '.join(files)} to {out}{removed}")  # two lines: <= 100 columns
    return 0


# ----------------------------------------------------------------------- inputs and location
def _input_files(args: FitOptions) -> dict[str, Path]:
    """Every input file by its option (``--counts`` first)."""
    from ..data import example_path

    counts, coords, distances = args.counts, args.coords, args.distances
    if counts is None:
        counts = Path(str(example_path("counts.csv")))
        if coords is None and distances is None:
            coords = Path(str(example_path("coords.csv")))
    elif coords is None and distances is None:
        raise UsageError("--coords or --distances is required with --counts (the prior's "
                         "covariance is a kernel of the covariates' locations)")
    if args.prior == "gmrf":
        _check_gmrf_options(args, coords)
    if args.predict_at is not None and coords is None:
        raise UsageError("--predict-at: needs --coords (prediction uses the kernel between "
                         "coordinates; a distance matrix says nothing about new covariates)")
    files = {"--counts": counts, "--coords": coords, "--distances": distances,
             "--predict-at": args.predict_at}
    return {option: Path(p) for option, p in files.items() if p is not None}


def _check_gmrf_options(args: FitOptions, coords: Any) -> None:
    if coords is None:
        raise UsageError("--prior gmrf: needs --coords (the field lives on the graph of the "
                         "coordinates; a distance matrix is the dense prior's input)")
    if args.learn_lengthscale:
        raise UsageError("--prior gmrf: --learn-lengthscale is for --prior kernel; compare "
                         "a few --lengthscale values by the ELBO in summary.json instead")
    if args.predict_at is not None:
        raise UsageError("--prior gmrf: --predict-at is for --prior kernel (the GMRF has no "
                         "covariance with points off its graph); add the new points as rows "
                         "of zero counts instead")


def _same_file(a: Path, b: Path) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def _check_no_input_is_output(inputs: dict[str, Path], out: Path) -> None:
    for option, src in inputs.items():
        for name in OUTPUTS:
            if _same_file(src, out / name):
                raise UsageError(f"{option} {src} is the output file {out / name}: the fit "
                                 f"would overwrite its own input; choose another --out")


def _check_output_location(out: Path) -> None:
    from .._fileio import check_output_dir

    try:
        check_output_dir(out)
    except OSError as exc:
        raise UsageError(f"--out: {_one_line(exc)}") from None
    for name in OUTPUTS:
        target = out / name
        if target.is_dir() and not target.is_symlink():
            raise UsageError(f"--out: {target} is a directory, where the output file {name} "
                             f"would go")


def _configuration(args: FitOptions, inputs: dict[str, Path]) -> dict[str, Any]:
    """What identifies a run's results (recorded in ``manifest.json``): the inputs by resolved
    path, the prior, the kernel and every option of ``summary.json``; as read back from JSON.
    """
    record = {"inputs": {option.lstrip("-"): os.path.realpath(path)
                         for option, path in inputs.items()},
              "prior": args.prior,
              "kernel": args.kernel if args.prior == "kernel" else None,
              "options": _options_record(args)}
    return dict(json.loads(json.dumps(record)))


def _options_record(args: FitOptions) -> dict[str, Any]:
    """The options that shape the results (``summary.json`` and the configuration)."""
    return {
        "lengthscale": args.lengthscale, "lengthscale_bounds": list(args.lengthscale_bounds),
        "learn_lengthscale": args.learn_lengthscale, "scale": args.scale,
        "learn_scale": args.learn_scale, "scale_prior": args.scale_prior,
        "learn_mean": args.learn_mean, "max_iter": args.max_iter, "tol": args.tol,
        "method": args.method, "uncertainty": args.uncertainty,
        "interval_method": args.interval_method, "level": args.level,
        "samples": args.samples, "seed": args.seed}


def _check_earlier_results(out: Path, config: dict[str, Any], overwrite: bool) -> None:
    """Refuse to replace output-named files in ``out`` unless they are the unchanged outputs of
    an earlier run of the same configuration (by its ``manifest.json``) or ``overwrite``.
    """
    present = [name for name in OUTPUTS if os.path.lexists(out / name)]
    if overwrite or not present:
        return
    advice = "choose another --out, or pass --overwrite to replace them"
    listed = ", ".join(present)
    manifest = _read_manifest(out / "manifest.json")
    if manifest is None:
        why = ("no manifest.json" if "manifest.json" not in present
               else "its manifest.json is not one of corrpriors fit")
        raise UsageError(f"--out: {out} holds {listed}, which corrpriors fit did not write "
                         f"({why}); {advice}")
    changed = [name for name in present
               if name != "manifest.json" and not _as_recorded(out / name, manifest, name)]
    if changed:
        raise UsageError(f"--out: {out} holds {', '.join(changed)}, changed or added since "
                         f"corrpriors fit wrote it (not as its manifest.json records); "
                         f"{advice}")
    earlier = manifest.get("configuration")
    if not isinstance(earlier, dict):
        raise UsageError(f"--out: {out} holds the results of an earlier corrpriors fit that "
                         f"did not record its configuration; {advice}")
    if earlier != config:
        raise UsageError(f"--out: {out} holds the results of another configuration "
                         f"({_differences(earlier, config)}); {advice}")


def _read_manifest(path: Path) -> dict[str, Any] | None:
    """The ``manifest.json`` of an earlier run (``None``: absent, unreadable or not ours)."""
    if path.is_symlink():
        return None
    try:
        manifest = json.loads(read_regular(path, MAX_MANIFEST_BYTES))
    except (OSError, ValueError, RecursionError):   # absent, not a regular file, too large
        return None
    if (not isinstance(manifest, dict) or manifest.get("command") != "corrpriors fit"
            or not isinstance(manifest.get("files"), dict)):
        return None
    return manifest


def _as_recorded(path: Path, manifest: dict[str, Any], name: str) -> bool:
    """Whether ``path`` is a regular file with the size and SHA-256 its manifest records."""
    entry = manifest["files"].get(name)
    size = entry.get("bytes") if isinstance(entry, dict) else None
    if not isinstance(size, int) or size < 0 or path.is_symlink():
        return False
    try:
        data = read_regular(path, size)     # a larger file is not the recorded one: not read
    except OSError:
        return False
    return entry == _file_record(data)


def _file_record(data: bytes) -> dict[str, Any]:
    """A file's entry in ``manifest.json``: its size and SHA-256 digest."""
    import hashlib

    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _differences(earlier: dict[str, Any], now: dict[str, Any], shown: int = 3) -> str:
    """``"--scale 1 -> 3, --learn-scale false -> true"``: the settings that differ."""
    def flat(record: dict[str, Any]) -> dict[str, Any]:
        items = {name: record.get(name) for name in ("prior", "kernel")}
        for group in ("inputs", "options"):
            values = record.get(group)
            items.update(values.items() if isinstance(values, dict) else [])
        return items

    old, new = flat(earlier), flat(now)
    names = [n for n in dict.fromkeys([*new, *old]) if old.get(n) != new.get(n)]
    parts = [f"--{n.replace('_', '-')} {json.dumps(old.get(n))} -> {json.dumps(new.get(n))}"
             for n in names[:shown]]
    if len(names) > shown:
        parts.append(f"{len(names) - shown} more")
    return ", ".join(parts) or "recorded differently"


def _table_limit(suffix: str) -> int:
    return MAX_NPY_TABLE_BYTES if suffix == ".npy" else MAX_TEXT_TABLE_BYTES


def _refused(where: str, suffix: str, exc: OSError) -> UsageError:
    """The one-line error of an input file that cannot be read (``exc`` from ``_fileio``)."""
    if isinstance(exc, FileNotFoundError):
        return UsageError(f"{where}: file not found")
    if isinstance(exc, TooLarge) and suffix == ".npy":
        return UsageError(f"{where}: {exc}; .npy tables are read up to "
                          f"{format_bytes(MAX_NPY_TABLE_BYTES)}")
    if isinstance(exc, TooLarge):
        return UsageError(f"{where}: {exc}; text tables are read up to "
                          f"{format_bytes(MAX_TEXT_TABLE_BYTES)}: save a larger one as .npy "
                          f"(numpy.save), read up to {format_bytes(MAX_NPY_TABLE_BYTES)}")
    if isinstance(exc, NotReadable):
        return UsageError(f"{where}: {exc}; give a file saved on disk")
    return UsageError(f"{where}: cannot read it ({exc.strerror or exc})")


def _check_input_file(path: Path, option: str) -> None:
    """Refuse, before anything is opened, an input of another type than the tables', that is
    missing, not a regular file (a named pipe would block the open, /dev/zero never ends) or
    larger than :data:`MAX_TEXT_TABLE_BYTES` / :data:`MAX_NPY_TABLE_BYTES`.
    """
    where = f"{option}: {path}"
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise UsageError(f"{where}: unsupported file type {suffix or '(no extension)'!r}; "
                         f"expected .csv (comma-separated), .tsv or .tab (tab-separated) or .npy")
    try:
        check_regular(path, _table_limit(suffix))
    except OSError as exc:
        raise _refused(where, suffix, exc) from None


def _read_table(path: Path, option: str) -> tuple[np.ndarray, list[str] | None]:
    """A numeric 2-D table (a single column or a 1-D ``.npy`` gives one column) and its header
    row (text tables only, ``None`` if absent); every error names ``option`` and the file.
    """
    where = f"{option}: {path}"
    suffix = path.suffix.lower()
    _check_input_file(path, option)
    try:
        fh = open_regular(path, _table_limit(suffix))
        with fh:
            if suffix == ".npy":
                return _read_npy(fh, where), None
            raw = fh.read(MAX_TEXT_TABLE_BYTES + 1)
        if len(raw) > MAX_TEXT_TABLE_BYTES:
            raise TooLarge(f"is more than the {MAX_TEXT_TABLE_BYTES:,} bytes read (it grew while read)")
    except OSError as exc:
        raise _refused(where, suffix, exc) from None
    if raw.startswith(b"\x93NUMPY"):
        raise UsageError(f"{where}: is a NumPy .npy file; give it the .npy extension")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise UsageError(f"{where}: is not UTF-8 text (byte 0x{raw[exc.start]:02x} on line "
                         f"{line}); save it as UTF-8 or as .npy") from None
    try:
        return parse_text_table(text, TEXT_DELIMITERS[suffix], where)
    except TableError as exc:
        raise UsageError(str(exc)) from None


def _check_npy_header(fh: BinaryIO, where: str) -> None:
    """Read the header of the ``.npy`` file ``fh`` (at its start) and refuse, before any data is
    allocated, a dtype that is not real numeric (objects would need pickle) or a declared shape
    whose data is not exactly what the file holds after the header (the file's size is bounded
    by :data:`MAX_NPY_TABLE_BYTES`, so the declared array is too). Without this a 193-byte file
    declaring shape (1e8, 1e8) made ``np.load`` ask for 71 PiB (a MemoryError traceback).
    """
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            shape, _fortran, dtype = fmt.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, _fortran, dtype = fmt.read_array_header_2_0(fh)
        else:
            raise UsageError(f"{where}: .npy format version {version[0]}.{version[1]} is not read "
                             f"(only 1.0 and 2.0, which numpy.save writes for numeric arrays)")
    except (ValueError, OSError, EOFError) as exc:
        raise UsageError(f"{where}: not a valid .npy file ({_one_line(exc)})") from None
    if dtype.hasobject:
        raise UsageError(f"{where}: holds Python objects (pickled data), which are never "
                         f"loaded; save a numeric array")
    if dtype.kind not in "iuf":
        raise UsageError(f"{where}: expected a real numeric array, got dtype {dtype}")
    declared = int(np.prod([int(n) for n in shape], dtype=object)) * dtype.itemsize
    held = os.fstat(fh.fileno()).st_size - fh.tell()
    if declared != held:
        raise UsageError(f"{where}: the header declares shape {tuple(shape)} of {dtype} "
                         f"({declared:,} bytes of data) but the file holds {held:,} bytes after "
                         f"the header; not a valid .npy file")


def _read_npy(fh: BinaryIO, where: str) -> np.ndarray:
    """The array of an open ``.npy`` file (regular, checked by :func:`_read_table`)."""
    magic = fh.read(6)
    if magic != b"\x93NUMPY":
        raise UsageError(f"{where}: not a valid .npy file (no NumPy header); save the array "
                         f"with numpy.save")
    fh.seek(0)
    _check_npy_header(fh, where)
    fh.seek(0)
    try:
        arr = np.load(fh, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise UsageError(f"{where}: holds Python objects (pickled data), which are never "
                             f"loaded; save a numeric array") from None
        raise UsageError(f"{where}: not a valid .npy file ({_one_line(exc)})") from None
    except (OSError, EOFError) as exc:
        raise UsageError(f"{where}: not a valid .npy file ({_one_line(exc)})") from None
    if not isinstance(arr, np.ndarray):
        raise UsageError(f"{where}: holds several arrays (.npz?); save one array with np.save")
    if arr.dtype.kind not in "iuf":
        raise UsageError(f"{where}: expected a real numeric array, got dtype {arr.dtype}")
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.size == 0:
        raise UsageError(f"{where}: expected a non-empty 2-D array, got shape {arr.shape}")
    return arr  # integer counts keep their exact values for the library's checks


class _Data:
    """The validated inputs: counts, category names, the bound kernel (``--prior kernel``) or
    the sparse precision (``--prior gmrf``) and the covariates to predict at (or ``None``).
    """

    def __init__(self, counts: np.ndarray, names: list[str], kernel: Any,
                 predict_at: np.ndarray | None = None, precision: Any = None) -> None:
        self.counts, self.names, self.kernel = counts, names, kernel
        self.predict_at, self.precision = predict_at, precision


def _load_inputs(inputs: dict[str, Path], args: FitOptions) -> _Data:
    from .._validation import check_counts

    raw, header = _read_table(inputs["--counts"], "--counts")
    counts = check_counts(raw, f"--counts: {inputs['--counts']}")
    c, k = counts.shape
    names = header if header is not None and len(header) == k else [f"p{j + 1}" for j in range(k)]
    kernel = _make_kernel(args) if args.prior == "kernel" else None
    predict_at = None
    if "--predict-at" in inputs:
        predict_at, _ = _read_table(inputs["--predict-at"], "--predict-at")
    _check_memory(args, c, k, 0 if predict_at is None else predict_at.shape[0])
    option = "--coords" if "--coords" in inputs else "--distances"
    path = inputs[option]
    values, _ = _read_table(path, option)
    if option == "--coords" and values.shape[0] != c:
        raise UsageError(f"--coords: {path}: expected {c} rows (one per row of --counts), got "
                         f"{values.shape[0]}")
    if option == "--distances" and values.shape != (c, c):
        raise UsageError(f"--distances: {path}: expected shape ({c}, {c}) to match the {c} rows "
                         f"of --counts, got {values.shape}")
    if predict_at is not None and predict_at.shape[1] != values.shape[1]:
        raise UsageError(f"--predict-at: {inputs['--predict-at']}: expected {values.shape[1]} "
                         f"columns (like --coords), got {predict_at.shape[1]}")
    try:
        if kernel is None:
            return _Data(counts, [str(n) for n in names], None, predict_at,
                          precision=_gmrf(values, args.lengthscale))
        bound = kernel.bind(**{option.lstrip("-"): values})
    except UsageError:
        raise
    except ValueError as exc:
        raise UsageError(f"{option}: {path}: {_one_line(exc)}") from None
    return _Data(counts, [str(n) for n in names], bound, predict_at)


def _check_memory(args: FitOptions, n_rows: int, n_categories: int, n_predict: int) -> None:
    """Refuse, before any C x C array exists, a run that cannot fit in memory."""
    from ._fit_prior import check_fit_memory

    samples = args.samples if (args.uncertainty or args.method == "mc") else 0
    try:
        check_fit_memory(n_rows, n_categories, prior=args.prior,
                         learn_lengthscale=args.learn_lengthscale, n_predict=n_predict,
                         mc_samples=samples)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _gmrf(coords: np.ndarray, lengthscale: float) -> Any:
    from ._fit_prior import LengthscaleRangeError, gmrf_precision

    try:
        return gmrf_precision(coords, lengthscale)
    except LengthscaleRangeError as exc:
        raise UsageError(str(exc)) from None


def _make_kernel(args: FitOptions) -> Any:
    from .. import kernels

    low, high = args.lengthscale_bounds
    if low > high:
        raise UsageError(f"--lengthscale-bounds: expected LOW <= HIGH, got {low:g} {high:g}")
    if args.learn_lengthscale and not low <= args.lengthscale <= high:
        raise UsageError(f"--lengthscale {args.lengthscale:g} lies outside --lengthscale-bounds "
                         f"{low:g} {high:g}, the range that --learn-lengthscale searches")
    cls = getattr(kernels, KERNELS[args.kernel])
    return cls(lengthscale=args.lengthscale, lengthscale_bounds=(low, high))


# ---------------------------------------------------------------------------------- fitting
class _Progress:
    """``callback(iteration, objective)`` for the fit, on stderr: one line updated in place on a
    terminal (at most every :data:`PROGRESS_INTERVAL` s), one line per iteration with
    ``--verbose``, nothing with ``--quiet`` or when stderr is not a terminal.
    """

    def __init__(self, args: FitOptions) -> None:
        self.stream = sys.stderr
        if args.quiet:
            self.mode = "off"
        elif args.verbose:
            self.mode = "lines"
        else:
            self.mode = "tty" if _isatty(self.stream) else "off"
        self.max_iter = args.max_iter
        self.quiet = args.quiet
        self.start = time.monotonic()
        self.last = -np.inf
        self.shown = False

    def __call__(self, iteration: int, objective: float) -> None:
        now = time.monotonic()
        if iteration == 0 and not self.quiet:
            self._estimate(now - self.start)
        if self.mode == "off":
            return
        text = (f"iteration {iteration + 1}/{self.max_iter}  objective {objective:.10g}  "
                f"elapsed {now - self.start:.1f} s")
        if self.mode == "lines":
            print(text, file=self.stream, flush=True)
        elif now - self.last >= PROGRESS_INTERVAL:
            self.stream.write(f"\r{text}\x1b[K")
            self.stream.flush()
            self.last, self.shown = now, True

    def _estimate(self, first: float) -> None:
        """Say the time --max-iter iterations would take when even a likely number of
        iterations would take over a minute.
        """
        bound = first * self.max_iter
        if first * min(self.max_iter, LIKELY_ITERATIONS) > ESTIMATE_FROM:
            _say(f"the first iteration took {first:.1f} s: up to {_duration(bound)} for "
                 f"--max-iter {self.max_iter} (less if it converges sooner)")

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _duration(seconds: float) -> str:
    """``"45 s"``, ``"12 min"``, ``"3.2 h"``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _fit(args: FitOptions, data: _Data) -> tuple[Any, list[dict[str, Any]]]:
    """Fit the model; return it and the warnings met (printed here, one line each)."""
    from ..core.model import CorrelatedMultinomial

    model = CorrelatedMultinomial(
        covariance=data.kernel, precision=data.precision, scale=args.scale, learn_scale=args.learn_scale,
        learn_mean=None if args.learn_mean == "none" else args.learn_mean,
        scale_prior=args.scale_prior,
        learn_kernel=args.learn_lengthscale, max_iter=args.max_iter, tol=args.tol)
    progress = _Progress(args)
    if args.verbose:
        _say(f"fitting C={data.counts.shape[0]} covariates, K={data.counts.shape[1]} "
             f"categories (--max-iter {args.max_iter}, --tol {args.tol:g})")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model.fit(data.counts, callback=progress)
        finally:
            progress.close()
    messages = _sort_warnings(caught)
    for m in messages:
        if m["category"] == "ConvergenceWarning" and m["message"].startswith(
                "CAVI did not converge"):
            m["message"] = _not_converged_advice(model, args)
    for m in messages:
        repeat = f" ({m['count']} times)" if m["count"] > 1 else ""
        _say(f"warning: {m['message']}{repeat}")
    return model, messages


def _not_converged_advice(model: Any, args: FitOptions) -> str:
    """The library's ConvergenceWarning in the command's terms: how far the fit was from
    --tol when it stopped at --max-iter, and which options to try.
    """
    from ..core.fixed_point import stall_advice

    advice = stall_advice(model.objective_trace_, args.tol, args.max_iter)
    tries = [f"--max-iter {advice.max_iter}"]
    if advice.tol is not None:  # close: a looser tolerance is a fair choice
        tries.append(f"--tol {advice.tol:.0e}")
    if args.learn_scale and model.scale_ < 0.02 * args.scale:
        tries.append(f"a fixed --scale or --scale-prior 2 1 (the scale fell to "
                     f"{model.scale_:.2g}: the counts may vary no more than the prior mean "
                     f"allows)")
    elif args.learn_lengthscale:
        tries.append("a fixed --lengthscale (without --learn-lengthscale)")
    return (f"not converged in --max-iter {args.max_iter} iterations (--tol {args.tol:g})"
            f"{advice.how_far('--tol')}; try {', or '.join(tries)}. The results are written "
            f"all the same (summary.json: converged false).")


def _relative_jitter(model: Any) -> float:
    """The diagonal jitter relative to the mean diagonal of the un-jittered covariance."""
    if model.covariance_ is None:  # a precision prior: no jitter
        return 0.0
    return float(model.jitter_ / (np.mean(np.diag(model.covariance_)) - model.jitter_))


def _sort_warnings(caught: list[warnings.WarningMessage]) -> list[dict[str, Any]]:
    """One entry per distinct warning (text on one line, no file path), with its count.

    The diagonal jitter that smooth kernels on close covariates need is silent in the core up to
    1e-8 of the mean diagonal and recorded in summary.json.
    """
    entries: dict[tuple[str, str], dict[str, Any]] = {}
    for w in caught:
        text = _one_line(w.message)
        entry = entries.setdefault((w.category.__name__, text), {
            "category": w.category.__name__, "message": text, "count": 0})
        entry["count"] += 1
    return list(entries.values())


# ---------------------------------------------------------------------------------- outputs
def _build_outputs(model: Any, args: FitOptions, data: _Data, inputs: dict[str, Path],
                   messages: list[dict[str, Any]], config: dict[str, Any],
                   start: float) -> dict[str, bytes]:
    """The bytes of every output file of this run, by file name (``summary.json`` last)."""
    files = {"probs.csv": _probs_csv(model, args, data.names),
             "psi.npz": _npz_bytes(psi_mean=model.psi_mean_, psi_var=model.psi_var_)}
    if data.predict_at is not None:
        files["predictions.csv"] = _probs_csv(model, args, data.names, data.predict_at)
    files["summary.json"] = _summary_json(model, args, data, inputs, messages,
                                          [*files, "summary.json", "manifest.json"], start)
    files["manifest.json"] = _manifest_json(files, config)
    return files


def _manifest_json(files: dict[str, bytes], config: dict[str, Any]) -> bytes:
    """``manifest.json``: the run's configuration and every other output of the run with its
    size and SHA-256 digest.
    """
    from .. import __version__

    manifest = {
        "command": "corrpriors fit", "corrpriors_version": __version__,
        "configuration": config,
        "files": {name: _file_record(data) for name, data in files.items()},
    }
    return (json.dumps(manifest, indent=2) + "\n").encode()


def _probs_csv(model: Any, args: FitOptions, names: list[str],
               new_covariates: np.ndarray | None = None) -> bytes:
    """``probs.csv`` (fitted covariates) or ``predictions.csv`` (``new_covariates``)."""
    if new_covariates is None:
        def probs_fn(**kw: Any) -> Any:
            return model.probs(**kw)

        def interval_fn(**kw: Any) -> Any:
            return model.credible_interval(**kw)
    else:
        def probs_fn(**kw: Any) -> Any:
            return model.predict_probs(new_covariates, **kw)

        def interval_fn(**kw: Any) -> Any:
            return model.predict_credible_interval(new_covariates, **kw)
    if args.method == "mc":
        probs = probs_fn(method="mc", n_samples=args.samples, rng=args.seed)
    else:
        probs = probs_fn(method="plugin")
    header = ["row", *names]
    columns = [probs]
    if args.uncertainty:
        lower, upper, sd = interval_fn(level=args.level, method=args.interval_method,
                                       n_samples=args.samples, rng=args.seed, return_std=True)
        header += [f"{n}_sd" for n in names] + [f"{n}_lower" for n in names] \
            + [f"{n}_upper" for n in names]
        columns += [sd, lower, upper]
    table = np.hstack(columns)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for i, row in enumerate(table):
        writer.writerow([i, *(f"{v:.12g}" for v in row)])
    return buf.getvalue().encode()


def _uncertainty_record(model: Any, args: FitOptions) -> dict[str, Any] | None:
    """What produced the --uncertainty columns (recorded in summary.json)."""
    if not args.uncertainty:
        return None
    record: dict[str, Any] = {"method": args.interval_method, "level": args.level,
                              "samples": args.samples, "seed": args.seed}
    if args.interval_method == "calibrated":
        post = model.calibrated_posterior()
        record["integrated_hyperparameters"] = list(post.names)
        record["grid_points"] = int(post.marginals.weights.size)
        record["ep_converged"] = bool(all(ep.converged for ep, _ in post.fits))
    elif args.interval_method == "vi":
        record["note"] = ("mean-field q: too narrow (90% intervals cover .81-.88 in "
                          "simulation-based calibration)")
    return record


def _npz_bytes(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, allow_pickle=False, **arrays)
    return buf.getvalue()


def _summary_json(model: Any, args: FitOptions, data: _Data, inputs: dict[str, Path],
                  messages: list[dict[str, Any]], outputs: list[str], start: float) -> bytes:
    from .. import __version__

    hyper = ({} if model.kernel_ is None
             else {h.name: h.value for h in model.kernel_.kernel.hyperparameters})
    summary = {
        "corrpriors_version": __version__,
        "inputs": {option.lstrip("-"): str(path) for option, path in inputs.items()},
        "n_covariates": int(data.counts.shape[0]),
        "n_categories": int(data.counts.shape[1]),
        "categories": data.names,
        "prior": args.prior,
        "kernel": args.kernel if args.prior == "kernel" else None,
        "options": _options_record(args),
        "uncertainty": _uncertainty_record(model, args),
        "elbo": float(model.elbo_),
        "objective": float(model.objective_),
        "n_iter": int(model.n_iter_),
        "converged": bool(model.converged_),
        "scale": float(model.scale_),
        "lengthscale": float(hyper.get("lengthscale", args.lengthscale)),
        "kernel_hyperparameters": hyper,
        "jitter": float(model.jitter_),
        "jitter_relative_to_mean_diagonal": _relative_jitter(model),
        "warnings": messages,
        "outputs": outputs,
        "elapsed_seconds": round(time.monotonic() - start, 3),
    }
    return (json.dumps(summary, indent=2) + "\n").encode()


def _write(out: Path, files: dict[str, bytes], stale: list[str]) -> None:
    """Write ``files`` into ``out`` and remove the ``stale`` outputs of an earlier run there,
    all or nothing.
    """
    from .._fileio import atomic_write_many

    try:
        atomic_write_many({out / name: data for name, data in files.items()},
                          remove=[out / name for name in stale])
    except OSError as exc:
        raise FitFailure(f"could not write the results into {out} "
                         f"({exc.strerror or _one_line(exc)}); nothing was written and earlier "
                         f"files there are unchanged") from None


__all__ = ["KERNELS", "OUTPUTS", "FitFailure", "FitOptions", "UsageError", "fit_files"]
