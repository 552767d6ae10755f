"""Where the tests that use real CIFAR-10 images find them: ``$HEADGEOM_CIFAR10_JPEG``.

The variable names the JPEG archive ``cifar10-jpeg.tar.gz`` (the 60,000 CIFAR-10 images as
JPEG files, ``<top>/{train,test}/<class>/<name>.jpg``; see tools/make_cifar10.py) or the folder
that holds it. Unset, or pointing at nothing, the tests that need it are skipped with a message
saying so; CI sets it (.ci/run).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ENV = "HEADGEOM_CIFAR10_JPEG"
ARCHIVE_NAME = "cifar10-jpeg.tar.gz"
ROOT = Path(__file__).resolve().parents[1]
MAKE_CIFAR10 = ROOT / "tools" / "make_cifar10.py"


def cifar10_jpeg_archive() -> Path:
    """The archive ``$HEADGEOM_CIFAR10_JPEG`` names; skips the calling test when there is none."""
    value = os.environ.get(ENV)
    if not value:
        pytest.skip(f"real CIFAR-10 not available: set {ENV} to {ARCHIVE_NAME} or the folder holding it")
    path = Path(value)
    archive = path / ARCHIVE_NAME if path.is_dir() else path
    if not archive.is_file():
        pytest.skip(f"real CIFAR-10 not available: {ENV}={value!r}, but {archive} is not a file")
    return archive


RELEASED_ENV = "HEADGEOM_RELEASED"


def released_results() -> Path:
    """The authors' released result arrays, ``$HEADGEOM_RELEASED`` (the folder holding MANIFEST.json
    and results/); skips the calling test when it is unset or holds no such folder. CI sets it (.ci/run)."""
    value = os.environ.get(RELEASED_ENV)
    if not value:
        pytest.skip(f"the authors' released results not available: set {RELEASED_ENV} to the folder holding "
                    "MANIFEST.json and results/ (the authors' published result arrays)")
    path = Path(value)
    if not (path / "results").is_dir():
        pytest.skip(f"the authors' released results not available: {RELEASED_ENV}={value!r}, but {path / 'results'} "
                    "is not a folder")
    return path
