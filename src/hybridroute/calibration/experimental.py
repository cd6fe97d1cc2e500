"""Research fitters: certified precision thresholds that spend delta along the sequence
otherwise (only ``benchmarks/bench_calibration.py`` uses them).

* :class:`FallbackPrecisionThreshold` -- Wiens' fallback procedure over label-free starts:
  the same guarantee as :class:`~hybridroute.calibration.CertifiedPrecisionThreshold`, and
  at the same delta it certifies everything the default does, and more after a few
  confident mistakes near the top.
* :class:`LabelFreeStartThreshold` -- one fixed sequence at the whole delta from the
  zero-error start.

They are full techniques (registered, so a policy holding one loads and its certificate is
checked); they are kept off the public calibration surface while they are research.
"""

from __future__ import annotations

from .techniques.fallback_precision import FallbackPrecisionThreshold, fallback_starts
from .techniques.label_free_start import LabelFreeStartThreshold

__all__ = ["FallbackPrecisionThreshold", "LabelFreeStartThreshold", "fallback_starts"]
