"""Warnings and exceptions raised by corrpriors."""


class ConvergenceWarning(UserWarning):
    """An iterative fit stopped at its iteration cap before meeting its tolerance."""


class JitterWarning(UserWarning):
    """A covariance needed diagonal jitter to be factorised."""


__all__ = ["ConvergenceWarning", "JitterWarning"]
