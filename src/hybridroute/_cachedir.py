"""The one root of hybridroute's caches (public sets, embeddings)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$HYBRIDROUTE_CACHE_DIR``, else ``$XDG_CACHE_HOME/hybridroute``, else
    ``~/.cache/hybridroute``."""
    env = os.environ.get("HYBRIDROUTE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "hybridroute"
