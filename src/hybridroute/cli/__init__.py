"""The ``hybridroute`` command line. Nothing in the library imports this package."""

from ._app import app, main

__all__ = ["app", "main"]
