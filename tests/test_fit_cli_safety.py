"""``corrpriors fit`` keeps data safe (issue 11): it never overwrites its inputs, checks the
output location before fitting, writes all outputs or none, and answers every bad input with
one line naming the file or option and exit status 2."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from corrpriors import _fileio
from corrpriors.cli import main
from corrpriors.data import load_example
from fifo_guard import FifoGuard

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def fit(args, capsys):
    try:
        rc = main(["fit", *map(str, args)])
    except SystemExit as exc:  # argparse errors
        rc = exc.code
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


@pytest.fixture
def files(tmp_path):
    counts, coords, _ = load_example()
    d = np.sqrt(((coords[:, None] - coords[None]) ** 2).sum(-1))
    paths = {"counts": tmp_path / "c.csv", "coords": tmp_path / "x.csv", "dist": tmp_path / "d.csv"}
    np.savetxt(paths["counts"], counts, delimiter=",", fmt="%d")
    np.savetxt(paths["coords"], coords, delimiter=",")
    np.savetxt(paths["dist"], d, delimiter=",")
    return paths


@pytest.fixture
def no_fit(monkeypatch):
    """Make any fit fail the test: the refusals must come before fitting."""
    from corrpriors.core.model import CorrelatedMultinomial

    def refuse(*args, **kwargs):
        raise AssertionError("the model was fitted before the check")

    monkeypatch.setattr(CorrelatedMultinomial, "fit", refuse)


def snapshot(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def one_line_error(rc, err, *needles):
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("corrpriors fit: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert str(n) in err, (n, err)


# --------------------------------------------------------------------- inputs are never outputs
@pytest.mark.parametrize("option, source, output", [
    ("--counts", "counts", "probs.csv"),
    ("--coords", "coords", "summary.json"),
    ("--distances", "dist", "psi.npz"),
])
def test_input_named_like_an_output_is_refused(tmp_path, files, capsys, no_fit, option, source,
                                               output):
    out = tmp_path / "out"
    out.mkdir()
    target = out / output
    target.write_bytes(files[source].read_bytes())
    args = {"--counts": files["counts"], "--coords": files["coords"]}
    if option == "--distances":
        args.pop("--coords")
    args[option] = target
    rc, _, err = fit([*(x for kv in args.items() for x in kv), "--out", out], capsys)
    one_line_error(rc, err, target, "would overwrite its own input")
    assert target.read_bytes() == files[source].read_bytes()
    assert sorted(p.name for p in out.iterdir()) == [output]


@pytest.mark.parametrize("how", ["symlink to output", "hard link", "output is a symlink",
                                 "--out is a symlink"])
def test_links_to_outputs_are_refused(tmp_path, files, capsys, no_fit, how):
    out = tmp_path / "out"
    out.mkdir()
    original = files["counts"].read_bytes()
    if how == "symlink to output":
        (out / "probs.csv").write_bytes(original)
        counts = tmp_path / "link.csv"
        counts.symlink_to(out / "probs.csv")
    elif how == "hard link":
        (out / "psi.npz").write_bytes(original)
        counts = tmp_path / "hard.csv"
        os.link(out / "psi.npz", counts)
    elif how == "output is a symlink":
        counts = files["counts"]
        (out / "probs.csv").symlink_to(counts)
    else:
        counts = tmp_path / "data" / "probs.csv"
        counts.parent.mkdir()
        counts.write_bytes(original)
        out.rmdir()
        out.symlink_to(counts.parent)
    rc, _, err = fit(["--counts", counts, "--coords", files["coords"], "--out", out], capsys)
    one_line_error(rc, err, counts, out, "would overwrite its own input")
    assert counts.read_bytes() == original


# ------------------------------------------------------------------------- output location
def test_out_that_is_a_file(tmp_path, files, capsys, no_fit):
    f = tmp_path / "results"
    f.write_text("keep me")
    rc, _, err = fit(["--out", f], capsys)
    one_line_error(rc, err, f"--out: {f} exists and is not a directory")
    rc, _, err = fit(["--out", f / "sub"], capsys)
    one_line_error(rc, err, f"--out: {f} is not a directory")
    assert f.read_text() == "keep me"


def test_output_file_that_is_a_directory(tmp_path, files, capsys, no_fit):
    (tmp_path / "o" / "summary.json").mkdir(parents=True)
    rc, _, err = fit(["--out", tmp_path / "o"], capsys)
    one_line_error(rc, err, f"{tmp_path / 'o' / 'summary.json'} is a directory")


@pytest.mark.skipif(ROOT, reason="root may write into read-only directories")
def test_read_only_location(tmp_path, files, capsys, no_fit):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        for out in (ro, ro / "new"):
            rc, _, err = fit(["--out", out], capsys)
            one_line_error(rc, err, f"--out: {ro} is not writable")
    finally:
        ro.chmod(0o755)


def test_read_only_file_system(tmp_path, files, capsys, no_fit, monkeypatch):
    """What a read-only mount answers (EROFS), injected so that the test also runs as root."""
    def erofs(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(_fileio.tempfile, "mkstemp", erofs)
    monkeypatch.setattr(_fileio.tempfile, "mkdtemp", erofs)
    for out in (tmp_path, tmp_path / "new"):
        rc, _, err = fit(["--out", out], capsys)
        one_line_error(rc, err, f"--out: cannot write in {tmp_path} (Read-only file system)")
    assert not (tmp_path / "new").exists()


# -------------------------------------------------------------------------- all or nothing
def test_failure_mid_write_keeps_every_previous_output(tmp_path, capsys, monkeypatch):
    """An I/O error on the second output file (at its fsync, after its bytes went out): exit 1,
    one line, and the previous run's three files unchanged, no temporaries left."""
    out = tmp_path / "o"
    assert fit(["--out", out], capsys)[0] == 0
    before = snapshot(out)
    calls = []
    real = os.fsync

    def failing(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(_fileio.os, "fsync", failing)
    rc, _, err = fit(["--out", out, "--lengthscale", "2", "--uncertainty", "--overwrite"], capsys)
    assert rc == 1 and err.count("\n") == 1
    assert err.startswith(f"corrpriors fit: error: could not write the results into {out} "
                          f"(Input/output error); nothing was written")
    assert snapshot(out) == before and sorted(p.name for p in out.iterdir()) == sorted(before)


def test_failure_while_replacing_restores_previous_outputs(tmp_path, capsys, monkeypatch):
    out = tmp_path / "o"
    assert fit(["--out", out], capsys)[0] == 0
    before = snapshot(out)
    real = os.replace
    calls = []

    def failing(src, dst):
        calls.append(dst)
        if len(calls) == 3:  # summary.json, after probs.csv and psi.npz were replaced
            raise OSError(errno.EIO, "Input/output error")
        real(src, dst)

    monkeypatch.setattr(_fileio.os, "replace", failing)
    rc, _, err = fit(["--out", out, "--lengthscale", "2", "--overwrite"], capsys)
    assert rc == 1 and "nothing was written" in err
    assert snapshot(out) == before and sorted(p.name for p in out.iterdir()) == sorted(before)


def test_file_size_limit_truncates_nothing(tmp_path, capsys):
    """A real short write, as on a full disk: under RLIMIT_FSIZE the larger probs.csv of an
    --uncertainty run cannot be written completely (EFBIG). The previous outputs survive."""
    pytest.importorskip("resource")
    out = tmp_path / "o"
    assert fit(["--out", out], capsys)[0] == 0
    before = snapshot(out)
    limit = max(len(b) for b in before.values()) + 100  # the old files fit, the new probs not
    script = textwrap.dedent(f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
        from corrpriors.cli import main
        sys.exit(main(["fit", "--out", {str(out)!r}, "--uncertainty", "--overwrite"]))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "File too large" in proc.stderr
    assert snapshot(out) == before and sorted(p.name for p in out.iterdir()) == sorted(before)


# -------------------------------------------------------------------- one-line input errors
def _write_npy_header(path, shape, data, version=(1, 0)):
    """A .npy file of float64 whose header declares ``shape`` and whose data is ``data``."""
    import io

    buf = io.BytesIO()
    header = {"descr": "<f8", "fortran_order": False, "shape": shape}
    write = np.lib.format.write_array_header_1_0 if version == (1, 0) else \
        np.lib.format.write_array_header_2_0
    write(buf, header)
    path.write_bytes(buf.getvalue() + data)


def _write_bad_inputs(d):
    counts, coords, _ = load_example()
    np.savetxt(d / "c.csv", counts, delimiter=",", fmt="%d")
    np.savetxt(d / "x.csv", coords, delimiter=",")
    np.savetxt(d / "short.csv", coords[:5], delimiter=",")
    neg = counts.copy()
    neg[3, 2] = -1
    np.savetxt(d / "neg.csv", neg, delimiter=",", fmt="%d")
    (d / "latin1.csv").write_bytes("a,b\n1,2\n3,caf\xe9\n".encode("latin-1"))
    (d / "ragged.csv").write_text("1,2,3\n4,5\n")
    (d / "word.csv").write_text("a,b\n1,2\n3,x\n")
    (d / "empty.csv").write_text("\n\n")
    (d / "header.csv").write_text("a,b\n")
    (d / "c.txt").write_text("1,2\n")
    np.save(d / "obj.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    np.save(d / "complex.npy", np.ones((25, 3), dtype=complex))
    np.save(d / "npy_named.npy", counts)
    (d / "disguised.csv").write_bytes((d / "npy_named.npy").read_bytes())
    (d / "junk.npy").write_bytes(b"not an array")
    _write_npy_header(d / "hugedims.npy", (10**8, 10**8), b"\0" * 64)   # 193 bytes declaring 80 PB
    _write_npy_header(d / "short.npy", (25, 3), b"\0" * 8 * 74)          # one float64 missing
    _write_npy_header(d / "long.npy", (25, 3), b"\0" * 8 * 76)           # one float64 too many
    _write_npy_header(d / "v2.npy", (10**6, 10**6), b"\0" * 8, version=(2, 0))
    (d / "dir.csv").mkdir()


BAD_INPUTS = [
    (["--counts", "{d}/missing.csv", "--coords", "{d}/x.csv"], ["{d}/missing.csv", "not found"]),
    (["--counts", "{d}/c.csv"], ["--coords or --distances is required"]),
    (["--counts", "{d}/c.csv", "--coords", "{d}/short.csv"], ["{d}/short.csv", "expected 25 rows"]),
    (["--counts", "{d}/c.csv", "--distances", "{d}/x.csv"], ["{d}/x.csv", "(25, 25)"]),
    (["--counts", "{d}/neg.csv", "--coords", "{d}/x.csv"], ["{d}/neg.csv", "non-negative"]),
    (["--counts", "{d}/latin1.csv", "--coords", "{d}/x.csv"],
     ["{d}/latin1.csv", "not UTF-8 text (byte 0xe9 on line 3)"]),
    (["--counts", "{d}/ragged.csv", "--coords", "{d}/x.csv"], ["{d}/ragged.csv", "line 2 has 2"]),
    (["--counts", "{d}/word.csv", "--coords", "{d}/x.csv"],
     ["{d}/word.csv", "line 3, column 2: 'x' is not a number"]),
    (["--counts", "{d}/empty.csv", "--coords", "{d}/x.csv"], ["{d}/empty.csv", "no data"]),
    (["--counts", "{d}/header.csv", "--coords", "{d}/x.csv"], ["{d}/header.csv", "no data rows"]),
    (["--counts", "{d}/c.txt", "--coords", "{d}/x.csv"], ["{d}/c.txt", "unsupported file type"]),
    (["--counts", "{d}/obj.npy", "--coords", "{d}/x.csv"], ["{d}/obj.npy", "never loaded"]),
    (["--counts", "{d}/complex.npy", "--coords", "{d}/x.csv"], ["{d}/complex.npy", "complex"]),
    (["--counts", "{d}/disguised.csv", "--coords", "{d}/x.csv"],
     ["{d}/disguised.csv", "give it the .npy extension"]),
    (["--counts", "{d}/junk.npy", "--coords", "{d}/x.csv"], ["{d}/junk.npy", "not a valid .npy"]),
    # the header's shape was believed: np.load asked for 71 PiB, a MemoryError traceback
    (["--counts", "{d}/hugedims.npy", "--coords", "{d}/x.csv"],
     ["--counts: {d}/hugedims.npy: the header declares shape (100000000, 100000000) of float64 "
      "(80,000,000,000,000,000 bytes of data) but the file holds 64 bytes after the header"]),
    (["--counts", "{d}/v2.npy", "--coords", "{d}/x.csv"],
     ["--counts: {d}/v2.npy: the header declares shape (1000000, 1000000)", "holds 8 bytes"]),
    (["--counts", "{d}/short.npy", "--coords", "{d}/x.csv"],
     ["--counts: {d}/short.npy: the header declares shape (25, 3) of float64 (600 bytes of data) "
      "but the file holds 592 bytes"]),
    (["--counts", "{d}/long.npy", "--coords", "{d}/x.csv"], ["{d}/long.npy", "holds 608 bytes"]),
    (["--counts", "{d}/c.csv", "--coords", "{d}/hugedims.npy"],
     ["--coords: {d}/hugedims.npy: the header declares shape (100000000, 100000000)"]),
    (["--counts", "{d}/dir.csv", "--coords", "{d}/x.csv"], ["{d}/dir.csv", "is a directory"]),
    (["--coords", "{d}/x.csv", "--distances", "{d}/x.csv"], ["not allowed with"]),
    (["--max-iter", "0"], ["--max-iter", "positive integer"]),
    (["--max-iter", "many"], ["--max-iter", "'many'"]),
    (["--tol", "-1"], ["--tol"]),
    (["--lengthscale", "nan"], ["--lengthscale"]),
    (["--kernel", "rbf"], ["--kernel", "invalid choice"]),
    (["--seed", "-1"], ["--seed"]),
    (["--lengthscale-bounds", "10", "1"], ["LOW <= HIGH"]),
    (["--lengthscale", "5000", "--learn-lengthscale"], ["outside --lengthscale-bounds"]),
    (["--out"], ["--out"]),
    ([], ["required: --out"]),
]


@pytest.mark.parametrize("args, needles", BAD_INPUTS,
                         ids=[" ".join(a).replace("{d}/", "") or "no-args" for a, _ in BAD_INPUTS])
def test_every_input_error_is_one_line_and_exit_2(tmp_path, capsys, args, needles):
    _write_bad_inputs(tmp_path)
    args = [a.format(d=tmp_path) for a in args]
    if "--out" not in args and args != []:
        args += ["--out", str(tmp_path / "o")]
    rc, out, err = fit(args, capsys)
    one_line_error(rc, err, *(n.format(d=tmp_path) for n in needles))
    assert out == "" and not (tmp_path / "o").exists()


@pytest.mark.parametrize("exc, status, message", [
    (KeyboardInterrupt(), 130, "corrpriors fit: interrupted; nothing written"),
    (FloatingPointError("CAVI: the objective is not finite at iteration 3"), 1,
     "corrpriors fit: error: CAVI: the objective is not finite at iteration 3"),
])
def test_interrupted_or_failed_fit_writes_nothing(tmp_path, capsys, monkeypatch, exc, status,
                                                  message):
    from corrpriors.core.model import CorrelatedMultinomial

    def failing(self, *args, callback=None, **kwargs):
        callback(0, -1.0)
        raise exc

    monkeypatch.setattr(CorrelatedMultinomial, "fit", failing)
    rc, out, err = fit(["--out", tmp_path / "o", "--verbose"], capsys)
    assert rc == status and out == ""
    assert err.splitlines()[-1] == message and "Traceback" not in err
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------- inputs that are not regular files
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
@pytest.mark.parametrize("option", ["--counts", "--coords", "--distances", "--predict-at"])
def test_a_named_pipe_is_refused_before_it_is_opened(tmp_path, files, capsys, no_fit, option):
    """A FIFO given as an input blocked ``corrpriors fit`` for ever (open waits for a writer);
    it is refused, naming the option, without being opened and before --out exists."""
    fifo = tmp_path / ("pipe.npy" if option == "--coords" else "pipe.csv")
    os.mkfifo(fifo)
    args = {"--counts": files["counts"], "--coords": files["coords"]}
    if option == "--distances":
        args.pop("--coords")
    args[option] = fifo
    with FifoGuard(fifo) as guard:
        rc, out, err = fit([*(x for kv in args.items() for x in kv), "--out", tmp_path / "o"], capsys)
    one_line_error(rc, err, f"{option}: {fifo}: is a named pipe (FIFO), not a regular file")
    assert not guard.opened and out == "" and not (tmp_path / "o").exists()


def test_a_device_is_refused(tmp_path, files, capsys, no_fit):
    """A link to a device (/dev/zero would be read for ever; /dev/null, used here, read as an
    empty file) is refused as a device."""
    if not os.path.exists("/dev/null"):
        pytest.skip("no /dev/null")
    link = tmp_path / "null.csv"
    link.symlink_to("/dev/null")
    rc, _, err = fit(["--counts", link, "--coords", files["coords"], "--out", tmp_path / "o"], capsys)
    one_line_error(rc, err, f"--counts: {link}: is a character device, not a regular file")


@pytest.mark.parametrize("suffix", [".csv", ".npy"])
def test_inputs_larger_than_the_limit_are_refused_unread(tmp_path, files, capsys, no_fit, monkeypatch,
                                                        suffix):
    import corrpriors.runner.fit as fit_module

    counts = tmp_path / f"big{suffix}"
    if suffix == ".npy":
        np.save(counts, np.loadtxt(files["counts"], delimiter=",").astype(np.int64))
        monkeypatch.setattr(fit_module, "MAX_NPY_TABLE_BYTES", 100)
        advice = ".npy tables are read up to 100 bytes"
    else:
        counts.write_bytes(files["counts"].read_bytes())
        monkeypatch.setattr(fit_module, "MAX_TEXT_TABLE_BYTES", 100)
        advice = "text tables are read up to 100 bytes: save a larger one as .npy (numpy.save)"
    size = counts.stat().st_size
    monkeypatch.setattr(fit_module, "open_regular", lambda *a: pytest.fail("opened"))
    rc, _, err = fit(["--counts", counts, "--coords", files["coords"], "--out", tmp_path / "o"], capsys)
    one_line_error(rc, err, f"--counts: {counts}: is {size:,} bytes, more than the 100 read; {advice}")
    assert not (tmp_path / "o").exists()


def test_an_input_that_grows_past_the_limit_while_read_is_refused(tmp_path, files, capsys, no_fit,
                                                                  monkeypatch):
    """The limit also holds for what is read (the size is checked before opening, the file may
    grow in between)."""
    import corrpriors.runner.fit as fit_module

    checks = []
    monkeypatch.setattr(fit_module, "check_regular", lambda *a: checks.append(a))
    monkeypatch.setattr(fit_module, "MAX_TEXT_TABLE_BYTES", 100)
    monkeypatch.setattr(_fileio, "_check_regular", lambda info, limit: None)
    rc, _, err = fit(["--counts", files["counts"], "--coords", files["coords"], "--out", tmp_path / "o"],
                     capsys)
    one_line_error(rc, err, f"--counts: {files['counts']}: is more than the 100 bytes read (it grew "
                            f"while read)")
    assert checks


def test_an_earlier_output_larger_than_recorded_is_not_read(tmp_path, files, capsys, monkeypatch):
    import corrpriors.runner.fit as fit_module

    args = ["--counts", files["counts"], "--coords", files["coords"], "--out", tmp_path / "o", "-q"]
    assert fit(args, capsys)[0] == 0
    probs = tmp_path / "o" / "probs.csv"
    with open(probs, "ab") as fh:                 # 1 MiB more than manifest.json records
        fh.write(b"0" * 2**20)
    hashed = []
    real = fit_module._file_record
    monkeypatch.setattr(fit_module, "_file_record", lambda data: hashed.append(len(data)) or real(data))
    rc, _, err = fit(args, capsys)
    one_line_error(rc, err, "holds probs.csv, changed or added since")
    assert hashed and max(hashed) < 2**20, hashed              # the other outputs only
