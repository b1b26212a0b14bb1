"""`policy check A B` checks the files together, as the server loads a directory of them."""

from tests.support.cli import run_cli
from tests.support.paths import EXAMPLE_POLICIES, SHIPPED_POLICY

DEFAULT = str(SHIPPED_POLICY)
T4 = str(EXAMPLE_POLICIES / "t4-vgpu-fleet.yaml")


def test_each_file_alone_passes():
    for path in (DEFAULT, T4):
        code, out, _ = run_cli("policy", "check", path)
        assert code == 0 and out.startswith("ok: ")


def test_files_that_clash_fail_together():
    """Both claim every namespace with `*`: one directory holding both would not load."""
    code, out, _ = run_cli("policy", "check", DEFAULT, T4)
    assert code == 1
    assert "equally specific" in out and "t4-vgpu-fleet.yaml#0" in out


def test_a_missing_path_is_reported_beside_the_others(tmp_path):
    code, out, _ = run_cli("policy", "check", str(tmp_path / "absent.yaml"), DEFAULT)
    assert code == 1
    assert out.splitlines() == [f"error: {tmp_path / 'absent.yaml'}: no such file or directory"]
