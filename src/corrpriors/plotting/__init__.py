"""Figures (matplotlib is imported only inside this package, and only when drawing).

Plotting takes data only -- arrays, a :class:`GridLayout` (or a grid-shaped MDP) and
``metrics.json`` records -- never seeds, and builds no environment. Every function takes an
optional ``ax`` and returns ``(fig, ax)``; figures made here are plain
:class:`matplotlib.figure.Figure` objects (no pyplot state, no window). Save with
:func:`save_figure`, which writes ``.png`` and ``.pdf`` atomically. :func:`method_label` and
:func:`method_style` give a method's label, colour, line style and marker from the one method
vocabulary (``pg``, ``pg_absolute``, ``dirichlet_sparse``, ...), so your figures match the package's;
``method_label(name, config)`` gives the label under a run's configuration (``Dirichlet α=1`` for
``dirichlet_sparse`` with ``alpha_sparse=1``), as ``metrics.json`` and the package's figures do.
"""

from .._methods import label as method_label
from .._methods import style as method_style
from ._common import GridLayout, save_figure
from ._maps import plot_error_map, plot_queueing_policy, plot_queueing_states, plot_state_values
from ._policy import plot_policy, policy_arrows

__all__ = [
    "GridLayout",
    "method_label",
    "method_style",
    "plot_policy",
    "policy_arrows",
    "plot_state_values",
    "plot_error_map",
    "plot_queueing_states",
    "plot_queueing_policy",
    "save_figure",
]
