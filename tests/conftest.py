"""Shared pytest configuration."""

import os

import matplotlib

matplotlib.use("Agg")  # never open a window

os.environ.setdefault("MPLBACKEND", "Agg")
