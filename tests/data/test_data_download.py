"""Download machinery without the network: urlopen is monkeypatched everywhere."""

from __future__ import annotations

import hashlib
import io
import shlex
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from headgeom.cli import build_parser, main
from headgeom.commands.data import FETCHABLE
from headgeom.data import download, load_cifar10, load_dataset
from headgeom.data.download import (CIFAR_ARCHIVES, Archive, download_and_extract,
                                    download_cifar, fetch_url, md5_file, safe_extract)

FOLDER = "cifar-10-batches-bin"
NAMES = [f"k{i}" for i in range(10)]


def record(label: int, value: int) -> bytes:
    return bytes([label]) + bytes([value]) * 1024 + bytes([value + 1]) * 1024 + \
        bytes([value + 2]) * 1024


def tar_bytes(files: dict[str, bytes], extra: list[tarfile.TarInfo] = ()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)
    return buf.getvalue()


def cifar_tar() -> bytes:
    files = {f"{FOLDER}/data_batch_{b}.bin": record(b, 10 * b) for b in range(1, 6)}
    files[f"{FOLDER}/test_batch.bin"] = record(7, 200) + record(3, 100)
    files[f"{FOLDER}/batches.meta.txt"] = ("\n".join(NAMES) + "\n").encode()
    return tar_bytes(files)


def serve(monkeypatch, payloads: dict[str, bytes]) -> list[str]:
    """Route urllib.request.urlopen to in-memory payloads; return the URLs requested."""
    calls: list[str] = []

    def fake_urlopen(url, timeout=None):
        calls.append(url)
        if url not in payloads:
            raise urllib.error.URLError("no route to host")
        return io.BytesIO(payloads[url])

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    return calls


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*"))


def test_official_archives_are_the_published_ones():
    # md5 values as published on https://www.cs.toronto.edu/~kriz/cifar.html
    published = {
        "cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a",
        "cifar-10-binary.tar.gz": "c32a1d4ab5d03f1284b67883e8d87530",
        "cifar-100-python.tar.gz": "eb9058c3a382ffc7106e4002c42a8d85",
        "cifar-100-binary.tar.gz": "03b5dce01913d631647c71ecec9e9cb8",
    }
    assert {a.filename: a.md5 for a in CIFAR_ARCHIVES.values()} == published
    for (name, layout), archive in CIFAR_ARCHIVES.items():
        assert archive.url == "https://www.cs.toronto.edu/~kriz/" + archive.filename
        assert ("100" in name) == ("100" in archive.folder)
    assert CIFAR_ARCHIVES[("cifar10", "python")].folder == "cifar-10-batches-py"
    assert CIFAR_ARCHIVES[("cifar100", "binary")].folder == "cifar-100-binary"


def test_offline_gives_clear_runtime_error(tmp_path, monkeypatch):
    calls = serve(monkeypatch, {})
    with pytest.raises(RuntimeError) as err:
        download_cifar("cifar10", tmp_path)
    msg = str(err.value)
    url = CIFAR_ARCHIVES[("cifar10", "binary")].url
    assert calls == [url]
    assert "could not reach" in msg and url in msg and "no route to host" in msg
    assert str(tmp_path / FOLDER) in msg
    assert leftovers(tmp_path) == []  # no partial file, no staging folder


def test_offline_through_load_dataset(tmp_path, monkeypatch):
    serve(monkeypatch, {})
    with pytest.raises(RuntimeError, match="cifar-100-python"):
        load_dataset("cifar100", data_dir=tmp_path, download=True, layout="python")


def test_oserror_during_read_is_offline_too(tmp_path, monkeypatch):
    class Broken(io.BytesIO):
        def read(self, *a):
            raise ConnectionResetError("reset by peer")

    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout=None: Broken(b""))
    with pytest.raises(RuntimeError, match="reset by peer"):
        fetch_url("https://example.invalid/x", tmp_path / "x", None)
    assert leftovers(tmp_path) == []


def test_download_verifies_extracts_and_loads(tmp_path, monkeypatch):
    data = cifar_tar()
    url = "https://example.invalid/cifar-10-binary.tar.gz"
    serve(monkeypatch, {url: data})
    monkeypatch.setitem(CIFAR_ARCHIVES, ("cifar10", "binary"),
                        Archive(url, hashlib.md5(data).hexdigest(), FOLDER, len(data)))
    test = load_dataset("cifar10", "test", data_dir=tmp_path, download=True)
    assert test.labels.tolist() == [7, 3] and test.classes == NAMES
    assert test.images[0, :, 5, 5].tolist() == [200, 201, 202]
    assert test.images[1, :, 31, 0].tolist() == [100, 101, 102]
    assert leftovers(tmp_path) == sorted([FOLDER] + [p.name for p in
                                                     (tmp_path / FOLDER).iterdir()])
    # second call finds the folder and does not touch the network
    serve(monkeypatch, {})
    assert download_cifar("cifar10", tmp_path) == tmp_path / FOLDER
    assert len(load_cifar10(tmp_path, "train")) == 5


def test_checksum_mismatch_leaves_nothing(tmp_path, monkeypatch):
    data = cifar_tar()
    url = "https://example.invalid/a.tar.gz"
    serve(monkeypatch, {url: data})
    wrong = "0" * 32
    with pytest.raises(ValueError) as err:
        download_and_extract(url, wrong, tmp_path, FOLDER)
    assert hashlib.md5(data).hexdigest() in str(err.value) and wrong in str(err.value)
    assert leftovers(tmp_path) == []


def test_fetch_url_streams_and_checks(tmp_path, monkeypatch):
    data = bytes(range(256)) * 5000  # > one 1 MiB chunk
    serve(monkeypatch, {"https://e.invalid/f": data})
    out = fetch_url("https://e.invalid/f", tmp_path / "sub" / "f", hashlib.md5(data).hexdigest())
    assert out.read_bytes() == data and md5_file(out) == hashlib.md5(data).hexdigest()
    assert leftovers(tmp_path) == ["f", "sub"]


def test_archive_without_expected_folder(tmp_path, monkeypatch):
    data = tar_bytes({"other/file.txt": b"x"})
    serve(monkeypatch, {"https://e.invalid/a.tgz": data})
    with pytest.raises(ValueError, match=r"did not unpack to cifar-10-batches-bin/.*other"):
        download_and_extract("https://e.invalid/a.tgz", hashlib.md5(data).hexdigest(),
                             tmp_path, FOLDER)
    assert not (tmp_path / FOLDER).exists()


@pytest.mark.parametrize("bad", ["../escape.txt", "ok/../../escape.txt", "/tmp/abs_escape.txt",
                                 "..\\escape.txt", "C:\\escape.txt"])
def test_safe_extract_rejects_escaping_members(tmp_path, bad):
    archive = tmp_path / "evil.tar.gz"
    archive.write_bytes(tar_bytes({"fine.txt": b"ok", bad: b"evil"}))
    dest = tmp_path / "dest"
    with pytest.raises(ValueError, match="refusing"):
        safe_extract(archive, dest)
    assert not dest.exists() or leftovers(dest) == []  # nothing extracted, not even fine.txt
    assert not (tmp_path / "escape.txt").exists()


def test_safe_extract_rejects_links(tmp_path):
    link = tarfile.TarInfo("data/link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    archive = tmp_path / "link.tar.gz"
    archive.write_bytes(tar_bytes({"data/a.bin": b"a"}, [link]))
    with pytest.raises(ValueError, match="link"):
        safe_extract(archive, tmp_path / "dest")


def test_safe_extract_plain_archive(tmp_path):
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(tar_bytes({"top/a.bin": b"abc", "top/sub/b.txt": b"hello"}))
    names = safe_extract(archive, tmp_path / "out")
    assert sorted(names) == ["top/a.bin", "top/sub/b.txt"]
    assert (tmp_path / "out/top/sub/b.txt").read_bytes() == b"hello"


def test_not_a_tar(tmp_path):
    (tmp_path / "x.tar.gz").write_bytes(b"not a tar")
    with pytest.raises(ValueError, match="not a readable tar"):
        safe_extract(tmp_path / "x.tar.gz", tmp_path / "out")


def test_unknown_archive_name():
    with pytest.raises(ValueError, match="layouts"):
        download_cifar("cifar10", "/tmp", layout="matlab")
    assert download.DATA_ENV_VAR == "HEADGEOM_DATA"


# ----------------------------------------------------------------- headgeom data fetch
def _named_command(message: str) -> list[str]:
    """The ``headgeom data fetch ...`` command a missing-dataset message names, as argv."""
    command = next(part for part in message.split("`") if part.startswith("headgeom data fetch"))
    return shlex.split(command)[1:]


def test_a_missing_cifar_names_the_command_that_fetches_it_where_it_was_looked_for(tmp_path, monkeypatch, capsys):
    data = cifar_tar()
    url = "https://example.invalid/cifar-10-binary.tar.gz"
    monkeypatch.setitem(CIFAR_ARCHIVES, ("cifar10", "binary"),
                        Archive(url, hashlib.md5(data).hexdigest(), FOLDER, len(data)))
    root = tmp_path / "data"
    with pytest.raises(FileNotFoundError) as err:
        load_cifar10(root)
    argv = _named_command(str(err.value))
    assert argv == ["data", "fetch", "cifar10", "--data-dir", str(root)]
    serve(monkeypatch, {url: data})
    assert main(argv) == 0  # the command it names is real and puts the data where it was looked for
    assert f"train on it with: headgeom train --data cifar10 --data-dir {root}" in capsys.readouterr().out
    assert load_cifar10(root, "test").labels.tolist() == [7, 3]


def test_the_default_data_folder_needs_no_option(tmp_path, monkeypatch):
    monkeypatch.setenv("HEADGEOM_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError) as err:
        load_dataset("cifar100", "train")
    assert _named_command(str(err.value)) == ["data", "fetch", "cifar100"]
    assert build_parser().parse_args(["data", "fetch", "cifar100"]).data_dir is None  # resolve_data_dir(None): here


def test_an_offline_fetch_is_one_line_and_leaves_no_folder(tmp_path, monkeypatch, capsys):
    serve(monkeypatch, {})
    root = tmp_path / "new" / "data"
    assert main(["data", "fetch", "cifar10", "--data-dir", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("headgeom data: error: could not reach ") and str(root) in err
    assert list(tmp_path.iterdir()) == []


def test_the_fetchable_names_are_the_official_archives():
    assert FETCHABLE == tuple(sorted({name for name, _ in CIFAR_ARCHIVES}))


def test_train_without_its_dataset_names_the_fetch_command_and_leaves_no_run_folder(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "runs" / "simclr"
    code = main(["train", "--method", "simclr", "--backbone", "resnet18", "--data", "cifar10", "--data-dir", str(empty),
                 "--epochs", "1", "--device", "cpu", "--quiet", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("headgeom train: error: CIFAR-10 not found"), err
    assert _named_command(err) == ["data", "fetch", "cifar10", "--data-dir", str(empty)]
    assert not (tmp_path / "runs").exists()
