"""Reading a W&B run's transaction log (``run-ID.wandb``) back, for the tests of
headgeom.train.wandb_logger, without wandb's Python reader (wandb.sdk.internal.datastore, removed
from recent releases).

The file, as wandb 0.31 writes it (the bytes inspected, not assumed):

- a 7-byte file header ``<4sHB``: ident ``b":W&B"``, magic ``0xBEE1``, version 0;
- then a LevelDB-style log in 32 KiB blocks (the header counts towards the first block): each
  chunk is a 7-byte header ``<IHB`` (checksum, payload length, kind) and its payload; a record
  that does not fit the block is split into FIRST, MIDDLE..., LAST chunks, one that fits is
  FULL; fewer than 7 bytes left in a block are zero padding;
- the checksum is zlib's CRC-32 (IEEE, not LevelDB's masked CRC-32C) of the kind byte and the
  payload;
- each record is a serialized ``wandb.proto.wandb_internal_pb2.Record``.

This reader is strict (a bad checksum, a torn chunk or an unknown kind raises), as a test's
reference should be; it is written apart from the logger's own resume scan on purpose.
"""
from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2 as pb

BLOCK = 32768
FILE_HEADER = struct.Struct("<4sHB")
CHUNK_HEADER = struct.Struct("<IHB")
IDENT, MAGIC, VERSION = b":W&B", 0xBEE1, 0
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def record_payloads(data: bytes) -> list[bytes]:
    """The serialized records of a whole ``.wandb`` file's bytes, in order."""
    return [payload for _, payload in record_spans(data)]


def record_spans(data: bytes) -> list[tuple[int, bytes]]:
    """[(end, payload)] of each record of a whole ``.wandb`` file's bytes: ``end`` is the offset
    just past the record's last chunk."""
    if FILE_HEADER.unpack_from(data) != (IDENT, MAGIC, VERSION):
        raise ValueError(f"not a W&B transaction log: header {data[:FILE_HEADER.size]!r}")
    pos, spans, pending = FILE_HEADER.size, [], None
    while pos < len(data):
        room = BLOCK - pos % BLOCK
        if room < CHUNK_HEADER.size:
            if data[pos:pos + room].strip(b"\0"):
                raise ValueError(f"non-zero block padding at byte {pos}")
            pos += room
            continue
        if pos + CHUNK_HEADER.size > len(data):
            raise ValueError(f"torn chunk header at byte {pos}")
        checksum, length, kind = CHUNK_HEADER.unpack_from(data, pos)
        payload = data[pos + CHUNK_HEADER.size:pos + CHUNK_HEADER.size + length]
        if len(payload) != length or CHUNK_HEADER.size + length > room:
            raise ValueError(f"torn chunk at byte {pos} (length {length})")
        if zlib.crc32(bytes([kind]) + payload) != checksum:
            raise ValueError(f"bad checksum at byte {pos}")
        pos += CHUNK_HEADER.size + length
        if kind == FULL and pending is None:
            spans.append((pos, payload))
        elif kind == FIRST and pending is None:
            pending = payload
        elif kind == MIDDLE and pending is not None:
            pending += payload
        elif kind == LAST and pending is not None:
            spans.append((pos, pending + payload))
            pending = None
        else:
            raise ValueError(f"chunk kind {kind} out of place at byte {pos}")
    if pending is not None:
        raise ValueError("the file ends inside a record")
    return spans


def read_records(path: str | Path) -> list[Any]:
    """The ``Record`` messages of one ``.wandb`` file."""
    records = []
    for payload in record_payloads(Path(path).read_bytes()):
        record = pb.Record()
        record.ParseFromString(payload)
        records.append(record)
    return records


def run_files(wandb_dir: str | Path, run_id: str) -> list[Path]:
    """The transaction logs of run ``run_id`` under ``wandb_dir`` (one per session of the run:
    wandb opens a new ``offline-run-TIME-ID`` folder each time the run is resumed), oldest first."""
    files = [f for f in Path(wandb_dir).glob(f"*/run-{run_id}.wandb") if not f.parent.is_symlink()]  # not latest-run
    return sorted(files, key=lambda f: run_record(read_records(f)).start_time.ToNanoseconds())


def run_record(records: list[Any]) -> Any:
    """The session's ``RunRecord`` (run id, project, display name, start time)."""
    runs = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    if len(runs) != 1:
        raise ValueError(f"expected one run record, found {len(runs)}")
    return runs[0]


def run_id(records: list[Any]) -> str:
    return run_record(records).run_id


def _put(tree: dict, keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        tree = tree.setdefault(key, {})
    tree[keys[-1]] = value


def _keys(item: Any) -> list[str]:
    return [item.key] if item.key else list(item.nested_key)


def history(records: list[Any]) -> list[tuple[int, dict[str, Any]]]:
    """[(step, row)] of the history records, in order; a row maps each logged name to its value
    (an image to its nested dict: ``_type``, ``path``, ``sha256``, ...); wandb's own ``_step``,
    ``_runtime`` and ``_timestamp`` are left out."""
    rows = []
    for record in records:
        if record.WhichOneof("record_type") == "history":
            row: dict[str, Any] = {}
            for item in record.history.item:
                keys = _keys(item)
                if keys[0] not in ("_step", "_runtime", "_timestamp"):
                    _put(row, keys, json.loads(item.value_json))
            rows.append((record.history.step.num, row))
    return rows


def config(records: list[Any]) -> dict[str, Any]:
    """The run's config after every update and removal, without wandb's own ``_wandb`` entry."""
    out: dict[str, Any] = {}
    for record in records:
        kind = record.WhichOneof("record_type")
        if kind in ("run", "config"):
            cfg = record.run.config if kind == "run" else record.config
            for item in cfg.update:
                _put(out, _keys(item), json.loads(item.value_json))
            for item in cfg.remove:
                out.pop(_keys(item)[0], None)
    out.pop("_wandb", None)
    return out


def saved_files(records: list[Any]) -> list[str]:
    """The paths (relative to the run's ``files/`` folder) the run asked wandb to upload."""
    return [f.path for r in records if r.WhichOneof("record_type") == "files" for f in r.files.files]


def artifacts(records: list[Any]) -> list[Any]:
    """The ``ArtifactRecord`` messages the run logged."""
    return [r.artifact for r in records if r.WhichOneof("record_type") == "artifact"]
