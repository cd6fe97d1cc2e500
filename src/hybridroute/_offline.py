"""Offline-safe defaults, applied before litellm or mlflow is first imported.

litellm fetches its model-cost map, its Anthropic beta-header table and its blog-post
feed from the network unless told to use the copies it ships; MLflow sends usage
telemetry unless told not to. A toolkit that is imported in CI, air-gapped servers and
notebooks should do neither by default. Each default is set only when the user has not
set the variable already, so an explicit choice always wins.

These four variables (listed in the README's "Offline by default") are the only change
hybridroute makes to its host's environment that outlives a call; everything else it
sets for MLflow or Spark is put back when the call returns.
"""

from __future__ import annotations

import os

_DEFAULTS: dict[str, str] = {
    # litellm: its bundled copies (the cost map is still used for offline cost accounting)
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
    # MLflow: no usage telemetry.
    "MLFLOW_DISABLE_TELEMETRY": "true",
}


def apply_offline_defaults() -> dict[str, str]:
    """Set each offline-safe environment default the user has not set; return those set."""
    applied = {}
    for key, value in _DEFAULTS.items():
        if key not in os.environ:
            os.environ[key] = value
            applied[key] = value
    return applied
