"""The installed package: only ``syncverify`` at top level, the design card's folders inside it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    pytest.importorskip("setuptools")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out), str(ROOT)], check=True, capture_output=True, timeout=300)
    (path,) = out.glob("syncverify-*.whl")
    return zipfile.ZipFile(path)


def test_a_wheel_installs_nothing_at_top_level_but_syncverify(wheel):
    top = {name.split("/")[0] for name in wheel.namelist()}
    assert {t for t in top if not t.endswith(".dist-info")} == {"syncverify"}
    # generic names such as `kernels` and `stress` belong to other packages on the index
    assert not {"kernels", "stress", "protocols"} & top


def test_the_folders_install_as_subpackages_with_their_data(wheel):
    names = set(wheel.namelist())
    for module in ("syncverify/kernels/__init__.py", "syncverify/stress/campaign.py",
                   "syncverify/protocols/registry.py", "syncverify/protocols/epoch-flag.toml",
                   "syncverify/litmus/examples/mp-cta.litmus", "syncverify/frontend/devices/iris.py",
                   "syncverify/kernels/bench/tiles/nvidia-h200.json"):
        assert module in names, module
    shipped = {n[len("syncverify/protocols/"):] for n in names
               if n.startswith("syncverify/protocols/") and n.endswith(".toml")}
    assert shipped == {str(p.relative_to(ROOT / "protocols")) for p in (ROOT / "protocols").glob("**/*.toml")}
    assert any(n.startswith("zoo/") for n in shipped)  # the zoo of reported bugs ships too


def test_the_pytest_plugin_is_registered_by_the_wheel(wheel):
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(name).decode()
    assert "[pytest11]\nsyncverify = syncverify.pytest_plugin" in text


def test_the_public_api_is_exported():
    import syncverify

    for name in syncverify.__all__:
        assert getattr(syncverify, name) is not None, name
    assert syncverify.check_protocol("epoch-flag", world_size=2).safe is True
