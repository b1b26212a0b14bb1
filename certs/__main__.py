"""Entry point for ``python -m certs``."""

import sys

from .cli import main

sys.exit(main())
