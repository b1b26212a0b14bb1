"""Entry point for ``python -m certs``: the `certs` command of `webhook.cli` as a program of its
own (the certificate Job in deploy/ runs it)."""

import sys

from webhook.cli.certs import main

sys.exit(main())
