"""Warnings and exceptions raised by corrpriors."""


class ConvergenceWarning(UserWarning):
    """An iterative fit stopped at its iteration cap before meeting its tolerance."""


class JitterWarning(UserWarning):
    """A covariance needed diagonal jitter to be factorised."""


class EnvironmentWarning(UserWarning):
    """An environment is built with settings that probably do not mean what they say.

    E.g. a Gymnasium keyword argument of another type than the environment's default
    (``{"is_slippery": "no"}``: a non-empty string, so slippery).
    """


__all__ = ["ConvergenceWarning", "EnvironmentWarning", "JitterWarning"]
