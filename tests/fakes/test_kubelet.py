"""The kubelet double updates a volume as pkg/volume/util/atomic_writer.go `Write` does.

Steps as numbered there (v1.23 on): (4) no change, no write; (5) `newTimestampDir`, a
`..2006_01_02_15_04_05.` temp dir with mode 0755; (6) the payload, files with the volume's
defaultMode (0644 unless set); (8) a `..data_tmp` symlink to it, (9) renamed over `..data`;
(10) visible `<name> -> ..data/<name>` links, made once; (11) visible paths no longer in the
payload removed; (12) the previous timestamped directory removed.
"""

import os
import re
import shutil
import stat

import pytest

from tests.fakes import kubelet
from tests.fakes.kubelet import ConfigMapVolume, atomic_write, install_kubelet_style

STAMP = re.compile(r"^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\w+$")


def hidden_dirs(target):
    """The hidden directories of a volume (not the `..data` link)."""
    return sorted(
        p.name for p in target.iterdir() if p.name.startswith("..") and not p.is_symlink()
    )


def visible(target):
    """The visible entries of a volume and where each link points."""
    return {p.name: os.readlink(p) for p in target.iterdir() if not p.name.startswith("..")}


# (payloads written one after another, visible files after the last, writes that changed it)
UPDATES = [
    ([{"a": b"1"}], {"a": "1"}, [True]),
    ([{"a": b"1"}, {"a": b"2"}], {"a": "2"}, [True, True]),
    ([{"a": b"1"}, {"a": b"1"}], {"a": "1"}, [True, False]),  # (4): same data, no write
    ([{"a": b"1", "b": b"2"}, {"a": b"1"}], {"a": "1"}, [True, True]),  # (11): b removed
    ([{"a": b"1"}, {"a": b"1", "b": b"2"}], {"a": "1", "b": "2"}, [True, True]),  # (10)
]


@pytest.mark.parametrize(
    ("payloads", "files", "wrote"),
    UPDATES,
    ids=["first", "changed", "unchanged", "file dropped", "file added"],
)
def test_updates_as_atomic_writer(tmp_path, payloads, files, wrote):
    assert [atomic_write(tmp_path, payload) for payload in payloads] == wrote
    assert visible(tmp_path) == {name: f"..data/{name}" for name in files}
    assert {name: (tmp_path / name).read_text() for name in files} == files
    assert hidden_dirs(tmp_path) == [os.readlink(tmp_path / "..data")]  # (12): one left
    assert STAMP.match(os.readlink(tmp_path / "..data"))
    assert not (tmp_path / "..data_tmp").exists()


def test_modes_are_newtimestampdirs_and_the_default_mode(tmp_path):
    atomic_write(tmp_path, {"a": b"1"})
    data = tmp_path / os.readlink(tmp_path / "..data")
    assert stat.S_IMODE(data.stat().st_mode) == 0o755
    assert stat.S_IMODE((data / "a").stat().st_mode) == 0o644


def record(monkeypatch, steps, module, name):
    """Record each call of `module.name` as (name, *its arguments as str), then make it."""
    real = getattr(module, name)

    def call(*args):
        steps.append((name, *map(str, args)))
        return real(*args)

    monkeypatch.setattr(module, name, call)


def test_the_swap_is_one_rename_between_write_and_cleanup(tmp_path, monkeypatch):
    atomic_write(tmp_path, {"a": b"1", "c": b"1"})
    first, steps = os.readlink(tmp_path / "..data"), []
    for module, name in [(os, "symlink"), (os, "rename"), (os, "remove"), (shutil, "rmtree")]:
        record(monkeypatch, steps, module, name)
    atomic_write(tmp_path, {"a": b"2", "b": b"3"})
    second = os.readlink(tmp_path / "..data")
    assert steps == [
        ("symlink", second, str(tmp_path / "..data_tmp")),  # (8)
        ("rename", str(tmp_path / "..data_tmp"), str(tmp_path / "..data")),  # (9)
        ("symlink", "..data/b", str(tmp_path / "b")),  # (10): only the new visible file
        ("remove", str(tmp_path / "c")),  # (11)
        ("rmtree", str(tmp_path / first)),  # (12)
    ]


def test_an_open_file_of_the_old_version_stays_readable(tmp_path):
    atomic_write(tmp_path, {"a": b"old"})
    with open(tmp_path / "a", "rb") as held:
        atomic_write(tmp_path, {"a": b"new"})
        assert held.read() == b"old"  # its directory is gone, the open file is not
    assert (tmp_path / "a").read_bytes() == b"new"


def test_install_kubelet_style_swaps_the_whole_set(tmp_path):
    sets = []
    for version in ("1", "2"):
        source = tmp_path / f"set{version}"
        source.mkdir()
        for name in kubelet.TLS_FILES:
            (source / name).write_text(f"{name} v{version}")
        sets.append(source)
    live = tmp_path / "live"
    install_kubelet_style(live, sets[0], "..v1")
    install_kubelet_style(live, sets[1], "..v2")
    assert os.readlink(live / "..data") == "..v2" and hidden_dirs(live) == ["..v2"]
    assert visible(live) == {name: f"..data/{name}" for name in kubelet.TLS_FILES}
    assert all((live / n).read_text() == f"{n} v2" for n in kubelet.TLS_FILES)


def test_configmap_volume_serves_policy_yaml_through_data(tmp_path):
    volume = ConfigMapVolume(tmp_path / "policies", "a: 1\n")
    assert volume.path == tmp_path / "policies"
    volume.write("a: 2\n")
    assert visible(volume.path) == {"policy.yaml": "..data/policy.yaml"}
    assert (volume.path / "policy.yaml").read_text() == "a: 2\n"
    assert len(hidden_dirs(volume.path)) == 1
