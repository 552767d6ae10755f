"""``headgeom released check|fetch``: exit codes, one-line errors, nothing written on bad input, and
fetch offline and online against a faked network (no test touches the real one)."""
from __future__ import annotations

import os
import shlex
import urllib.error
import urllib.request

import numpy as np
import pytest

from released_copy import Response, write_copy
import headgeom.released.cli as released_cli
from headgeom.cli import build_parser, main
from headgeom.released import MANIFEST

GUILLOTINE = "results/cifar10/resnet18/guillotine_results.npy"


@pytest.fixture
def copy(tmp_path, monkeypatch):
    c = write_copy(tmp_path / "copy")
    monkeypatch.setattr(released_cli, "MANIFEST", c.manifest)  # the command checks against the copy's own pins
    return c


def _files(root):
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("headgeom released: error: "), err
    return err


def test_check_prints_a_table_of_every_file(copy, capsys):
    assert main(["released", "check", str(copy.root)]) == 0
    out = capsys.readouterr().out
    assert all(f"`{p}` | ok |" in out for p in MANIFEST.paths)
    assert "3 runs, 3 seeds x 5 epochs" in out and "4 orbits" not in out and "6 orbits x 4 angles" in out


def test_check_reads_the_environment_variable(copy, capsys, monkeypatch):
    monkeypatch.setenv("HEADGEOM_RELEASED", str(copy.root))
    assert main(["released", "check"]) == 0
    assert f"released results at {copy.root}" in capsys.readouterr().out
    monkeypatch.delenv("HEADGEOM_RELEASED")
    assert main(["released", "check"]) == 2
    assert "pass DIR or set HEADGEOM_RELEASED" in _error_line(capsys)


@pytest.mark.parametrize("damage", ["sha", "truncate", "missing", "hostile"])
def test_check_of_a_bad_copy_exits_2_naming_the_file_and_writes_nothing(copy, capsys, tmp_path, damage):
    path, marker = copy.file(GUILLOTINE), tmp_path / "pwned"
    if damage == "sha":
        data = bytearray(path.read_bytes())
        data[-3] ^= 1
        path.write_bytes(bytes(data))
    elif damage == "truncate":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "missing":
        path.unlink()
    else:
        class Evil:
            def __reduce__(self):
                return os.system, (f"touch {marker}",)
        np.save(path, {"head_acc_mlp": Evil()}, allow_pickle=True)
    before = _files(copy.root)
    assert main(["released", "check", str(copy.root)]) == 2
    err = _error_line(capsys)
    assert str(path) in err and "1 of 20 released files missing or bad" in err
    assert _files(copy.root) == before and not marker.exists()


def test_check_of_a_hostile_file_pinned_as_is_refuses_at_the_unpickler(copy, capsys, tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)
    np.save(copy.file(GUILLOTINE), {"head_acc_mlp": Evil()}, allow_pickle=True)
    copy.repin()
    released_cli.MANIFEST = copy.manifest  # restored by the fixture's monkeypatch
    assert main(["released", "check", str(copy.root)]) == 2
    err = _error_line(capsys)
    assert "system" in err and "nothing was executed" in err and not marker.exists()


def _offline(*args, **kwargs):
    raise urllib.error.URLError("Name or service not known")


def test_fetch_offline_is_one_line_with_the_addresses_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", _offline)
    dest = tmp_path / "released"
    assert main(["released", "fetch", str(dest), "--quiet"]) == 2
    err = _error_line(capsys)
    first = MANIFEST.url(MANIFEST.files[0].path)
    assert f"could not reach {first}" in err and MANIFEST.commit in err
    assert f"download the {len(MANIFEST.files)} pinned files" in err and f"place each at {dest / '<path>'}" in err
    assert not dest.exists()


def test_fetch_downloads_checks_and_keeps_intact_files(copy, tmp_path, capsys, monkeypatch):
    served = {copy.manifest.url(p): (copy.root / p).read_bytes() for p in copy.manifest.paths}
    asked = []

    def urlopen(url, timeout=None):
        asked.append(url)
        return Response(served[url])
    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    dest = tmp_path / "fetched"
    assert main(["released", "fetch", str(dest), "--quiet"]) == 0
    assert "20 file(s) downloaded, 0 already intact" in capsys.readouterr().out
    assert _files(dest) == {dest / p.relative_to(copy.root): b for p, b in _files(copy.root).items()}
    assert not [p for p in dest.rglob("*.part")]
    asked.clear()
    assert main(["released", "fetch", str(dest), "--quiet"]) == 0  # everything intact: nothing fetched
    assert asked == [] and "0 file(s) downloaded, 20 already intact" in capsys.readouterr().out
    # a download that does not match its pin is refused and leaves the old file untouched
    (dest / GUILLOTINE).unlink()
    served[copy.manifest.url(GUILLOTINE)] = b"tampered"
    assert main(["released", "fetch", str(dest), "--quiet"]) == 2
    err = _error_line(capsys)
    assert "checksum mismatch" in err and "sha256" in err and not (dest / GUILLOTINE).exists()
    assert not [p for p in dest.rglob("*.part")]


def test_fetch_into_a_file_is_refused_before_any_download(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", _offline)
    (tmp_path / "f").write_text("x")
    assert main(["released", "fetch", str(tmp_path / "f")]) == 2
    assert "is a file" in _error_line(capsys)


def test_every_released_help_page_ends_with_examples_that_parse(capsys):
    for argv in (["released", "--help"], ["released", "fetch", "--help"], ["released", "check", "--help"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 0
        text = capsys.readouterr().out
        tail = text.split("\nexamples:\n", 1)[1]
        lines = [ln.split("  #")[0].strip() for ln in tail.splitlines() if ln.strip().startswith("headgeom")]
        assert lines, argv
        for line in lines:
            build_parser().parse_args(shlex.split(line)[1:])


def test_released_without_an_action_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["released"])
    assert exit_.value.code == 2
