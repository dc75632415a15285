"""Deprecated alias of :mod:`corrpriors._special` (moved in corrpriors 0.2; removed in 0.3)."""

from .._deprecation import moved

__getattr__, __dir__ = moved(__name__, "corrpriors._special")
