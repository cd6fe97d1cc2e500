"""``python -m benchmarks``: run every ``bench_*.py`` and print one table (see ``_runner``)."""

from __future__ import annotations

import sys

from ._runner import main

if __name__ == "__main__":
    sys.exit(main())
