"""Test helpers shipped with the package.

* :class:`StandInLLM` -- a local OpenAI-compatible chat-completions server on 127.0.0.1
  with pluggable answer policies and seeded fault injection, so the real LLM client stack
  can be tested with no provider. Its answers are never an LLM's accuracy.
* :class:`StandInProcess` -- the same server in a child process (its own CPU).

Importing :mod:`hybridroute.testing` imports aiohttp; nothing in the library imports it.
"""

from __future__ import annotations

from .standin_llm import (
    EXCLUSIVE_FAULTS,
    FAULT_KINDS,
    ClassifierPolicy,
    HashPolicy,
    LabelMapPolicy,
    ObeyInjections,
    StandInAnswer,
    StandInLLM,
    StandInProcess,
    parse_fault_rates,
)

__all__ = [
    "EXCLUSIVE_FAULTS",
    "FAULT_KINDS",
    "ClassifierPolicy",
    "HashPolicy",
    "LabelMapPolicy",
    "ObeyInjections",
    "StandInAnswer",
    "StandInLLM",
    "StandInProcess",
    "parse_fault_rates",
]
