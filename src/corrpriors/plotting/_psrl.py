"""Figures of the PSRL experiments (paper Figs. 3b and 4): learning curves per PSRL variant."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping

from ._curves import plot_metric_curves, save_png_pdf

#: Legend labels of the PSRL belief models.
MODEL_LABELS = {
    "pg": "PG (relative)",
    "pg_absolute": "PG (absolute)",
    "dirichlet_uniform": "Dirichlet α=1",
    "dirichlet_sparse": "Dirichlet α=1e-3",
}
VARIANT_TITLES = {"sampling": "PSRL, averaged Q of posterior samples", "mean": "PSRL, posterior mean"}


def plot_psrl_curves(summary: Mapping, metric: str, path_without_suffix: str | pathlib.Path,
                     reference: float | None = None, reference_label: str = "optimal policy",
                     band: str = "std") -> list[pathlib.Path]:
    """Mean learning curves with spread bands, one panel per PSRL variant.

    Parameters
    ----------
    summary : mapping
        A ``metrics.json`` record whose methods are named ``<model>_<variant>``.
    metric : str
        The metric to draw.
    path_without_suffix : str or pathlib.Path
        Output path; ``.png`` and ``.pdf`` are appended.
    reference : float, optional
        Level of the optimal policy (dashed line).
    reference_label : str
        Legend label of the reference line.
    band : {"std", "sem", "none"}
        Band half-width (see :func:`corrpriors.plotting._curves.plot_metric_curves`).

    Returns
    -------
    list of pathlib.Path
        The written ``.png`` and ``.pdf`` files.
    """
    import matplotlib.pyplot as plt

    methods = list(summary["metrics"][metric]["methods"])
    variants = [v for v in ("sampling", "mean") if any(m.endswith("_" + v) for m in methods)]
    fig, axes = plt.subplots(1, max(len(variants), 1), figsize=(5.2 * max(len(variants), 1), 3.8),
                             layout="constrained", squeeze=False, sharey=True)
    for ax, variant in zip(axes[0], variants):
        chosen = [m for m in methods if m.endswith("_" + variant)]
        labels = {m: MODEL_LABELS.get(m[: -len(variant) - 1], m) for m in chosen}
        plot_metric_curves(summary, metric, ax=ax, methods=chosen, labels=labels, band=band)
        if reference is not None:
            ax.axhline(reference, color="k", linestyle="--", linewidth=1, label=reference_label)
            ax.legend(frameon=False, fontsize="small")
        n_seeds = len(summary.get("seeds", []))
        ax.set_title(f"{VARIANT_TITLES[variant]} ({n_seeds} seeds, ±{band})", fontsize="medium")
    return save_png_pdf(fig, path_without_suffix)


__all__ = ["MODEL_LABELS", "plot_psrl_curves"]
