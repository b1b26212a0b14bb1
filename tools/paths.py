"""Where the checkout is, for tools and tests alike: they take the repository's root from here
rather than from their own location, so that moving a module moves nothing it reads.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
