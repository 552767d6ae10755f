"""The copy `headgeom released fetch` puts in the cache folder is found by every command without an
option or a variable: `--released DIR`, else $HEADGEOM_RELEASED, else $XDG_CACHE_HOME/headgeom/released
(~/.cache/headgeom/released). The fetch needs the network, which tests never touch: the cache is filled
from a synthetic copy (tests/released_copy.py) and from the real one when $HEADGEOM_RELEASED names it."""
from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from released_copy import Response, write_copy
import headgeom.released.cli as released_cli
from headgeom.cli import main
from headgeom.released.manifest import (MANIFEST, RELEASED_ENV, ReleasedFileError, default_released_dir,
                                        resolve_released_dir)

REAL = os.environ.get(RELEASED_ENV, "")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty XDG cache folder and home; no $HEADGEOM_RELEASED. Returns where the copy goes."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(RELEASED_ENV, raising=False)
    return tmp_path / "xdg" / "headgeom" / "released"


def test_the_cache_folder_follows_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_released_dir() == tmp_path / "xdg" / "headgeom" / "released"
    for unusable in ("", "relative/cache"):  # the XDG spec: a relative path is to be ignored
        monkeypatch.setenv("XDG_CACHE_HOME", unusable)
        assert default_released_dir() == tmp_path / "home" / ".cache" / "headgeom" / "released"


def test_without_a_copy_the_message_names_the_fetch_and_where_it_goes(cache):
    with pytest.raises(ReleasedFileError) as err:
        resolve_released_dir()
    msg = str(err.value)
    assert "pass --released DIR or set HEADGEOM_RELEASED=DIR" in msg
    assert f"download one with `headgeom released fetch` (" in msg and str(cache) in msg
    assert not cache.exists()


def test_a_fetched_copy_is_found_after_the_option_and_the_variable(cache, tmp_path, monkeypatch):
    write_copy(cache)
    assert resolve_released_dir() == cache
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv(RELEASED_ENV, str(other))
    assert resolve_released_dir() == other  # the variable first
    assert resolve_released_dir(tmp_path) == tmp_path  # the option before both


def test_a_copy_a_fetch_left_half_way_says_how_to_finish_it(cache, capsys, monkeypatch):
    copy = write_copy(cache)
    (cache / MANIFEST.files[3].path).unlink()
    first = MANIFEST.files[3].path
    with pytest.raises(ReleasedFileError, match=rf"incomplete \(1 of 20 pinned files missing, first {first}\): "
                                                r"finish it with `headgeom released fetch`"):
        resolve_released_dir()
    monkeypatch.setattr(released_cli, "MANIFEST", copy.manifest)
    assert main(["released", "check"]) == 2  # check shows the copy's table, the missing file in it
    out, err = capsys.readouterr()
    assert f"released results at {cache}" in out and f"`{MANIFEST.files[3].path}` | missing |" in out
    assert err.count("\n") == 1 and "1 of 20 released files missing or bad" in err


def test_fetch_without_a_folder_fills_the_cache_folder(cache, tmp_path, capsys, monkeypatch):
    copy = write_copy(tmp_path / "upstream")
    monkeypatch.setattr(released_cli, "MANIFEST", copy.manifest)
    served = {copy.manifest.url(p): (copy.root / p).read_bytes() for p in copy.manifest.paths}
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout=None: Response(served[url]))
    assert main(["released", "fetch", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"20 file(s) downloaded, 0 already intact, in {cache}; headgeom reproduce finds it there" in out
    assert all((cache / p).read_bytes() == b for p, b in ((p, (copy.root / p).read_bytes()) for p in MANIFEST.paths))
    assert resolve_released_dir() == cache


def test_an_offline_fetch_is_one_line_and_creates_no_cache_folder(cache, capsys, monkeypatch):
    def offline(*args, **kwargs):
        raise urllib.error.URLError("Name or service not known")
    monkeypatch.setattr(urllib.request, "urlopen", offline)
    assert main(["released", "fetch"]) == 2
    progress, error = capsys.readouterr().err.splitlines()  # what it was fetching, then why it stopped
    assert progress == f"fetching {MANIFEST.files[0].path} ({MANIFEST.files[0].bytes} bytes)"
    assert error.startswith(f"headgeom released: error: could not reach {MANIFEST.url(MANIFEST.files[0].path)}")
    assert f"place each at {cache / '<path>'}" in error
    assert not (cache.parents[1]).exists()  # not even $XDG_CACHE_HOME, which did not exist before


@pytest.mark.skipif(not REAL, reason="HEADGEOM_RELEASED is unset: the real released copy is not copied into a "
                    "cache folder (the synthetic-copy tests above ran)")
def test_reproduce_finds_the_real_copy_in_the_cache_folder_without_a_variable(cache, tmp_path, capsys):
    shutil.copytree(REAL, cache)  # as `headgeom released fetch` leaves it
    assert main(["released", "check"]) == 0
    assert f"released results at {cache}" in capsys.readouterr().out
    out = tmp_path / "out"
    assert main(["reproduce", "--only", "RELEASED", "--quiet", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["claims"] and not results["skipped"]
    assert {c["source"] for c in results["claims"]} == {"authors' runs, re-judged"}
    assert "released runs are not in this report" not in (out / "report.md").read_text()
