"""`python -m certs install` SIGKILLed after each of its writes, and two of them at once, on the
real kube-apiserver of the session (tests/certs/interrupted.py): every state seen, between
writes and after the kill, keeps the invariant "every caBundle verifies the serving Secret's
certificate", and the next run completes what the killed one began: the CA in its own Secret,
the serving Secret without it.

Run with `-s` to see the table of docs/RELIABILITY.md ("certs install interrupted").
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.certs.interrupted import CaNames, State, Stepped, observe

# What each scenario finds in the cluster, and the writes `certs install` makes there: the
# three caBundles, the CA Secret, the ConfigMap, the serving Secret (tests/certs/
# test_install.py checks the order), each only where it changes.
SCENARIOS = {
    # no Secret: the first run of the certificate Job
    "first install": (None, 6),
    # a set issued 210 days ago with a 300-day CA: the CA is due, the serving cert renewed too
    "CA rotation": ((210, 300), 6),
    # a set issued 25 days ago: the 30-day serving certificate is due, the CA is not
    "serving rotation": ((25, 30), 1),
    # the serving Secret of an install made before the CA had a Secret of its own: the CA
    # Secret and the ConfigMap created, then the CA dropped from the serving Secret
    "migration": ("older", 3),
}
HEADER = (
    "| scenario | stopped after | CA Secret | Secret | caBundle M | V | V-final | verifies |",
    "|---|---|---|---|---|---|---|---|",
)


@pytest.fixture(scope="module")
def table():
    """The rows of this module's tests, printed at its end."""
    rows: list[str] = []
    yield rows
    print("\n" + "\n".join((*HEADER, *rows)))


def prepare(cluster, scenario: str, tmp_path) -> CaNames:
    """The scenario's cluster; CA names starting with the CA found there (CA1)."""
    seeded = SCENARIOS[scenario][0]
    if seeded == "older":
        cluster.seed_older_install(datetime.now(UTC) - timedelta(days=1), cluster.spec.days)
    elif seeded is not None:
        days_ago, days = seeded
        cluster.seed_set(datetime.now(UTC) - timedelta(days=days_ago), days)
    names = CaNames()
    observe(cluster, names, tmp_path)
    return names


def row(table: list[str], scenario: str, step: str, state: State) -> State:
    table.append(
        f"| {scenario} | {step} | {state.ca_secret} | {state.secret} | "
        f"{' | '.join(state.bundles)} | {state.verdict} |"
    )
    return state


POINTS = [(s, k) for s, (_, writes) in SCENARIOS.items() for k in range(1, writes + 1)]


@pytest.mark.parametrize("scenario, stop", POINTS, ids=[f"{s}-{k}" for s, k in POINTS])
def test_killed_after_a_write_then_run_again(cluster, tmp_path, table, scenario, stop):
    names, seen = prepare(cluster, scenario, tmp_path), []
    run = Stepped(cluster)
    for step in range(1, stop + 1):
        label = run.next_write()
        assert label is not None, f"exited before write {step}: {run.printed}"
        seen.append(observe(cluster, names, tmp_path))
        if step < stop:
            run.go()
    run.kill()
    row(table, scenario, f"write {stop} ({label}), SIGKILL", seen[-1])
    assert Stepped(cluster).finish() == 0
    after = row(table, scenario, "→ the next run, to its end", observe(cluster, names, tmp_path))
    assert [s.verifies for s in seen if s.verifies is False] == []
    assert after.verifies is True
    cluster.secret_set()
    cluster.secret_set()  # the CA in its Secret only, the ConfigMap holding its bundle


RACES = [(s, end) for s in ("first install", "CA rotation") for end in ("killed", "finishes")]


@pytest.mark.parametrize("scenario, second_ends", RACES, ids=[f"{s}-{e}" for s, e in RACES])
def test_two_installers_at_once(cluster, tmp_path, table, scenario, second_ends):
    """A makes its three caBundle writes, then B, from the same Secrets, makes its own; then
    A writes the CA Secret, and B is SIGKILLed there or left to finish (its CA Secret write is
    a 409: it reads A's CA and writes caBundles again). Then a next run."""
    names, seen = prepare(cluster, scenario, tmp_path), []

    def watch(who: str, run: Stepped, writes: int) -> None:
        """Observe `run`'s next `writes` writes; it stays stopped after the last."""
        for step in range(1, writes + 1):
            label = run.next_write()
            assert label is not None, f"{who} exited before write {step}: {run.printed}"
            seen.append(row(table, scenario, f"{who}: {label}", observe(cluster, names, tmp_path)))
            if step < writes:
                run.go()

    # Started one after the other, so that B reads the Secret after A's caBundle writes.
    first = Stepped(cluster)
    watch("A", first, 3)
    second = Stepped(cluster)
    watch("B", second, 3)
    first.go()
    watch("A", first, 1)
    if second_ends == "killed":
        second.kill()
    else:
        assert second.finish() == 0
    assert first.finish() == 0
    step = "B SIGKILLed; A finishes" if second_ends == "killed" else "A and B finish"
    seen.append(row(table, scenario, step, observe(cluster, names, tmp_path)))
    assert Stepped(cluster).finish() == 0
    after = row(table, scenario, "→ the next run, to its end", observe(cluster, names, tmp_path))
    assert [s.verifies for s in seen if s.verifies is False] == []
    assert after.verifies is True
    cluster.secret_set()
