"""`python -m certs` as a shell meets it: no sub-command lists the choices, `--days` past the
CA's lifetime is cut with a warning, and a reader closing stdout ends it quietly (exit 141).
Messages are golden files under tests/golden/cli/.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.support.certs import run_certs
from tests.support.golden import check_golden
from tests.support.paths import GOLDEN
from webhook.cli.conventions import CLOSED_STDOUT_EXIT

FLAGS = ("--service", "lwgpu", "--namespace", "lwgpu-system")
# The expiry date moves with the clock; the rest of the line is the contract.
DATE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ")


def test_no_command_lists_the_commands():
    result = run_certs()
    assert (result.returncode, result.stdout) == (2, "")
    assert "arguments are required" not in result.stderr
    check_golden(GOLDEN / "cli" / "missing-certs.txt", result.stderr)


def test_days_past_the_ca_lifetime_warn_with_the_date_and_the_fix(tmp_path):
    result = run_certs("generate", *FLAGS, "--days", "5000", "--out", tmp_path / "set")
    assert result.returncode == 0, result.stderr
    warning = [line for line in result.stderr.splitlines() if "warning" in line]
    check_golden(GOLDEN / "cli" / "certs-days-cut.txt", DATE.sub("DATE", "\n".join(warning)) + "\n")


def test_days_within_the_ca_lifetime_say_nothing_more(tmp_path):
    result = run_certs("generate", *FLAGS, "--days", "1825", "--out", tmp_path / "set")
    assert result.returncode == 0 and "warning" not in result.stderr


def test_generate_into_a_closed_pipe_ends_quietly(tmp_path):
    """`python -m certs generate ... | head -0`: the set is written, exit 141, no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "certs", "generate", *FLAGS, "--out", str(tmp_path / "set")],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=60,
            # Without PYTHONUNBUFFERED, as users run it; see tests/offline/test_cli_messages.py.
            env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},
        )
    finally:
        os.close(write_end)
    assert done.returncode == CLOSED_STDOUT_EXIT
    assert done.stderr == f"certs: {tmp_path / 'set'}: wrote ca.crt, ca.key, tls.crt, tls.key\n"
