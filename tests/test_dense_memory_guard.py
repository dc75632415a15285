"""A dense prior from a kernel is refused before its C x C arrays exist when it cannot fit in
memory (audit M3): ``SquaredExponential(...).bind(coords=...)`` on 15,000 covariates used to
allocate for seconds and die in a raw ``MemoryError``; only ``corrpriors fit`` checked the size.
The budget is set with ``CORRPRIORS_MEMORY_LIMIT`` so that nothing big is ever allocated here.
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

from corrpriors import CorrelatedMultinomial
from corrpriors._memory import MemoryEstimateError
from corrpriors.cli import main
from corrpriors.kernels import BoundKernel, Matern32, SquaredExponential

#: 6 C x C float64 matrices at C = 10,000: 4.47 GiB, far above the 100 MiB budget.
REFUSED = (r"a dense kernel prior on C = 10,000 covariates \(6 C x C float64 matrices: .*\) "
           r"would need about 4\.47 GiB, more than the 100 MiB this process may use "
           r"\(CORRPRIORS_MEMORY_LIMIT\); use a sparse precision instead .*graph_precision")


@pytest.fixture
def budget_100m(monkeypatch):
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "100M")


def test_binding_ten_thousand_coordinates_is_refused_up_front(budget_100m):
    coords = np.arange(10_000.0)[:, None]
    tracemalloc.start()
    start = time.monotonic()
    try:
        with pytest.raises(MemoryEstimateError, match=REFUSED) as info:
            SquaredExponential(lengthscale=2.0).bind(coords=coords)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < 1.0
    assert peak < 10 * 2**20  # no C x C array (one is 763 MiB)
    assert isinstance(info.value, ValueError)
    assert str(info.value).count("\n") == 0


def test_the_model_on_such_a_kernel_never_starts(budget_100m):
    """The reproducer of the audit, at C = 10,000 (the refusal comes from bind)."""
    with pytest.raises(MemoryEstimateError, match="C = 10,000 covariates"):
        CorrelatedMultinomial(SquaredExponential(lengthscale=2.0).bind(
            coords=np.arange(10_000.0)[:, None])).fit(np.ones((10_000, 3), int))


def test_distances_and_direct_construction_are_checked_too(monkeypatch):
    """bind(distances=...) refuses before validating (copying) the caller's matrix; a
    BoundKernel built directly is checked as well (with_theta keeps a checked binding's size,
    so it is not checked again)."""
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "1M")  # 6 x 8 x 200^2 = 1.83 MiB
    x = np.arange(200.0)[:, None]
    d = np.abs(x - x.T)
    k = Matern32(lengthscale=3.0)
    with pytest.raises(MemoryEstimateError, match=r"C = 200 covariates .* about 1\.83 MiB"):
        k.bind(distances=d)
    with pytest.raises(MemoryEstimateError, match="C = 200 covariates"):
        BoundKernel(k, d)
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "2M")
    bound = k.bind(distances=d)  # fits: 1.83 MiB
    assert bound.gram().shape == (200, 200)


def test_small_problems_are_unaffected(budget_100m):
    """C = 1,000 needs 45.8 MiB by the estimate (a fit peaks at about 10 such matrices, 76 MiB
    measured), and fits under the 100 MiB budget as before."""
    rng = np.random.default_rng(0)
    coords = rng.uniform(0, 30, size=(1000, 2))
    bound = SquaredExponential(lengthscale=2.0).bind(coords=coords)
    model = CorrelatedMultinomial(bound, max_iter=5).fit(rng.poisson(2, size=(1000, 3)))
    assert model.psi_mean_.shape == (1000, 2)
    assert bound.with_theta(bound.theta).n_covariates == 1000


def test_fit_command_reports_the_refusal_in_one_line(tmp_path, capsys, budget_100m):
    """The command's own estimate uses the memory available now (ample here); the library's
    budget check then answers with exit status 2 and one line, before any fitting."""
    c = 3000  # 6 x 8 x 3000^2 = 412 MiB
    np.savetxt(tmp_path / "c.csv", np.ones((c, 3), int), delimiter=",", fmt="%d")
    np.savetxt(tmp_path / "x.csv", np.arange(float(c))[:, None], delimiter=",")
    rc = main(["fit", "--counts", str(tmp_path / "c.csv"), "--coords", str(tmp_path / "x.csv"),
               "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert err.startswith(f"corrpriors fit: error: --coords: {tmp_path / 'x.csv'}: a dense "
                          f"kernel prior on C = 3,000 covariates")
    assert "412 MiB" in err and "--prior gmrf" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("n", [float("inf"), np.float64("inf")])
def test_an_overflowed_estimate_is_said_in_words_not_inf_eib(n, monkeypatch):
    """An estimate that overflowed printed "about inf EiB"."""
    from corrpriors._memory import TOO_LARGE, about_bytes, check_memory, format_bytes

    assert format_bytes(n) == about_bytes(n) == TOO_LARGE == "an amount too large to represent"
    assert (format_bytes(0), format_bytes(1023), format_bytes(3 * 2**30)) == ("0 bytes", "1023 bytes", "3 GiB")
    assert about_bytes(1.5 * 2**60) == "about 1.5 EiB"
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "1G")
    with pytest.raises(MemoryEstimateError, match=r"^the tables would need an amount too large to represent, "
                                                  r"more than the 1 GiB this process may use") as info:
        check_memory(n, "the tables", "use fewer states")
    assert "inf" not in str(info.value) and "nan" not in str(info.value)


@pytest.mark.parametrize("n", [float("nan"), np.float64("nan")])
def test_a_nan_estimate_is_refused_as_unknown_not_as_too_large(n, monkeypatch):
    """A NaN estimate crashed in int() (format_bytes) or passed check_memory as if it fitted."""
    from corrpriors._memory import UNKNOWN, about_bytes, check_memory, format_bytes

    assert format_bytes(n) == about_bytes(n) == UNKNOWN == "an amount that could not be estimated"
    monkeypatch.setenv("CORRPRIORS_MEMORY_LIMIT", "1G")
    with pytest.raises(MemoryEstimateError, match=r"^the tables would need an amount that could not be "
                                                  r"estimated \(NaN\), so it is not attempted") as info:
        check_memory(n, "the tables", "use fewer states")
    assert "too large" not in str(info.value) and "use fewer states" in str(info.value)
