"""The ``corrpriors`` command line (also ``python -m corrpriors``).

Each sub-command is one module of this package exposing ``configure(parser)`` (adds the
sub-command's arguments) and ``run(args) -> int`` (turns the arguments into options, calls the
work in :mod:`corrpriors.runner` and returns an exit code). Adding a command is one module here
and one line in :data:`SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help)
SUBCOMMANDS = {
    "fit": ("corrpriors.cli.fit", "fit a correlated multinomial model to a count matrix"),
    "reproduce": ("corrpriors.cli.reproduce", "reproduce the paper's experiments"),
    "report": ("corrpriors.cli.report", "one HTML page of a results folder (figures, tables, claims)"),
    "sysid": ("corrpriors.cli.sysid",
              "system identification on any discrete Gymnasium environment (Hellinger error vs transitions)"),
    "psrl": ("corrpriors.cli.psrl",
             "PSRL on any discrete Gymnasium environment (normalised return vs steps)"),
}


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with one sub-parser per sub-command."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="corrpriors",
        description="Correlation priors for reinforcement learning (Alt, Sosic & Koeppl, NeurIPS 2019).",
    )
    parser.add_argument("--version", action="version", version=f"corrpriors {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.configure(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``corrpriors`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    return int(args._run(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
