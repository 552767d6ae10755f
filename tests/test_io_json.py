"""headgeom.io's one JSON convention: NaN as null, ±inf as "inf"/"-inf", read back by json_number."""
from __future__ import annotations

import ast
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from headgeom.geometry.linalg.spectrum import spectrum
from headgeom.io import atomic_write_json, json_number, json_safe

SRC = Path(__file__).resolve().parents[1] / "src" / "headgeom"


@dataclasses.dataclass
class _Point:
    x: float
    tags: tuple[str, ...]


def test_non_finite_numbers_are_written_one_way_and_read_back():
    values = [1.5, -2.0, math.nan, math.inf, -math.inf, 0.0]
    written = json.loads(json.dumps(json_safe(values), allow_nan=False))
    assert written == [1.5, -2.0, None, "inf", "-inf", 0.0]
    back = [json_number(v) for v in written]
    assert back[:2] == values[:2] and math.isnan(back[2]) and back[3:] == values[3:]
    with pytest.raises(ValueError, match="'nan' is not a number headgeom writes"):
        json_number("nan")


def test_arrays_scalars_dataclasses_and_paths_become_plain_json():
    obj = {1: np.float32(0.5), "t": torch.tensor([1.0, float("inf")]), "a": np.array([[np.nan]]),
           "p": Path("a/b"), "d": _Point(float("-inf"), ("u",)), "s": {3, 1}, "b": np.bool_(True),
           "i": np.int64(7)}
    assert json_safe(obj) == {"1": 0.5, "t": [1.0, "inf"], "a": [[None]], "p": "a/b",
                              "d": {"x": "-inf", "tags": ["u"]}, "s": [1, 3], "b": True, "i": 7}
    with pytest.raises(TypeError, match="cannot be written as JSON"):
        json_safe({"x": object()})


def test_atomic_write_json_and_spectrum_follow_the_convention(tmp_path):
    atomic_write_json(tmp_path / "r.json", {"v": [math.inf, math.nan]})
    assert json.loads((tmp_path / "r.json").read_text()) == {"v": ["inf", None]}
    # a zero block has an infinite or undefined condition number; either is written as the rule says
    blocks = torch.eye(3, dtype=torch.float64).repeat(2, 1, 1)
    blocks[1] = torch.diag(torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))
    s = spectrum(blocks)
    raw = s.per_block["condition_number"].tolist()
    d = json.loads(json.dumps(s.to_dict(), allow_nan=False))
    assert d["per_block"]["condition_number"] == json_safe(raw)
    assert all(json_number(w) == r or (math.isnan(r) and w is None)
               for w, r in zip(d["per_block"]["condition_number"], raw))


def _json_dump_calls(path: Path) -> list[ast.Call]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("dump", "dumps") and getattr(n.func.value, "id", None) == "json"]


def test_every_json_writer_goes_through_json_safe():
    # json.dump(s) outside headgeom.io must wrap its value in json_safe/jsonable: a second
    # sanitiser (or none, where NaN would become an invalid NaN token) would break the convention
    allowed = {"runs/lock.py"}  # the lock holder's host/pid/time: strings and ints, no numbers to sanitise
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "io.py" or rel in allowed:
            continue
        for call in _json_dump_calls(path):
            arg = call.args[0] if call.args else None
            wrapped = (isinstance(arg, ast.Call) and getattr(arg.func, "id", None) in ("json_safe", "jsonable"))
            if not wrapped:
                bad.append(f"{rel}:{call.lineno}")
    assert not bad, "json.dump(s) of a value not passed through headgeom.io.json_safe: " + ", ".join(bad)
