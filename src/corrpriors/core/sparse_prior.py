"""Deprecated alias of :mod:`corrpriors.core.priors.sparse`.

Moved before the first release (0.1.0 is the only version so far); removed in corrpriors 0.3.
"""

from .._deprecation import moved

__getattr__, __dir__ = moved(__name__, "corrpriors.core.priors.sparse")
