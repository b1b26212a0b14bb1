"""One version: `webhook.__version__`. pyproject.toml reads it (setuptools' `attr`), `lwgpu
--version` prints it; the files that cannot read Python carry a copy, compared with it here:
the Helm chart's appVersion and the image's label and tag. The install's image tag is checked
by tests/deploy/test_workloads.py, the default tag of the chart by tests/deploy/test_helm.py.
"""

from __future__ import annotations

import re

import yaml
from setuptools.config.pyprojecttoml import read_configuration

from tests.support.paths import DEPLOY, REPO
from webhook import __version__


def test_the_package_metadata_takes_webhook_version():
    assert read_configuration(REPO / "pyproject.toml")["project"]["version"] == __version__


def test_the_chart_app_version_is_the_package_version():
    chart = yaml.safe_load((DEPLOY / "helm" / "lwgpu" / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__


def test_the_image_label_and_tag_are_the_package_version():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert re.findall(r'org\.opencontainers\.image\.version="([^"]*)"', dockerfile) == [__version__]
    assert set(re.findall(r"ghcr\.io/lwgpu/lwgpu:(\S+)", dockerfile)) == {__version__}
