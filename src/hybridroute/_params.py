"""scikit-learn's public parameter API, for estimators that do not import scikit-learn.

:class:`ParamsMixin` reads the ``__init__`` signature and gives ``get_params(deep=...)``
and ``set_params(**params)`` with nested ``<name>__<parameter>`` keys, exactly the
protocol :func:`sklearn.base.clone`, grid searches and pipelines use, so those work on
our classifiers. It is implemented here instead of inheriting
:class:`sklearn.base.BaseEstimator` because importing scikit-learn costs 0.5-1.5 s, and
``import hybridroute.classifiers``, the router and loading a saved model do not need it.

A leaf module (standard library only): any part may use it.
"""

from __future__ import annotations

import inspect
from typing import Any, Self

__all__ = ["ParamsMixin"]


class ParamsMixin:
    """``get_params`` / ``set_params`` from the ``__init__`` signature.

    The estimator contract it relies on: ``__init__`` takes every parameter by name (no
    ``*args``) and stores each, unchanged, as an attribute of the same name.
    """

    @classmethod
    def _param_names(cls) -> list[str]:
        """The ``__init__`` parameter names, in signature order."""
        init = cls.__init__
        if init is object.__init__:
            return []
        names = []
        for param in inspect.signature(init).parameters.values():
            if param.name == "self" or param.kind is param.VAR_KEYWORD:
                continue
            if param.kind is param.VAR_POSITIONAL:
                raise RuntimeError(
                    f"{cls.__name__}.__init__ takes *{param.name}; an estimator must name "
                    "every parameter so that get_params / clone can rebuild it"
                )
            names.append(param.name)
        return names

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor arguments, by name (scikit-learn's ``get_params``).

        Parameters
        ----------
        deep : bool, default True
            Also list the parameters of arguments that have ``get_params`` (a cascade's
            stages, a nested fitter) as ``<name>__<parameter>``.

        Returns
        -------
        dict
            Parameter name to the value ``__init__`` (or :meth:`set_params`) stored.
        """
        out: dict[str, Any] = {}
        for name in self._param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params: Any) -> Self:
        """Set constructor arguments (scikit-learn's ``set_params``); returns ``self``.

        ``<name>__<parameter>`` sets a parameter of the argument ``name``. Values are
        stored unchecked, as ``__init__`` stores them (``fit`` validates); learned state
        is left as it is, so refit (or ``sklearn.base.clone``) for a change to take effect.

        Raises
        ------
        ValueError
            A name that is not a parameter of this estimator, or a nested name whose
            argument has no ``set_params``.
        """
        names = self._param_names()
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, sep, sub = key.partition("__")
            if name not in names:
                raise ValueError(
                    f"unknown parameter {name!r} of {type(self).__name__}; its parameters "
                    f"are {', '.join(names) or '(none)'}"
                )
            if sep:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            inner = getattr(self, name)
            if not callable(getattr(inner, "set_params", None)):
                raise ValueError(
                    f"{type(self).__name__}.{name} has no parameters of its own "
                    f"(it is {type(inner).__name__}); cannot set {', '.join(sorted(sub_params))}"
                )
            inner.set_params(**sub_params)
        return self
