"""``headgeom analyze FILE.npz`` (headgeom.orbits.external): an array whose metrics are computed
here with numpy, every malformed input (exit 2, one line), and the conversion in docs/analyze.md of the
authors' orbit_visualization.npy layout run on a synthetic array of that layout."""

from __future__ import annotations

import base64
import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from bootstrap_reference import bca_by_hand
from headgeom.cli import main
from headgeom.orbits.bootstrap import bootstrap_indices
from headgeom.orbits.external import load_orbit_npz

pytestmark = pytest.mark.usefixtures("one_thread")

ANALYZE_DOC = Path(__file__).resolve().parents[2] / "docs" / "analyze.md"  # the conversion users copy


# ---- numpy references (the definitions, written here)

def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def spread(f):
    u = unit(f)
    return (((u - u.mean(axis=1, keepdims=True)) ** 2).sum(axis=(1, 2)) / f.shape[1]).mean()


def global_spread(f):
    u = unit(f).reshape(-1, f.shape[-1])
    return ((u - u.mean(axis=0)) ** 2).sum(axis=1).mean()


def centred_spread(f):
    return spread(f - f.reshape(-1, f.shape[-1]).mean(axis=0))


def d_inter(f, labels):
    cents = [unit(f)[labels == c].reshape(-1, f.shape[-1]).mean(axis=0) for c in np.unique(labels)]
    return np.mean([np.linalg.norm(a - b) for i, a in enumerate(cents) for b in cents[i + 1:]])


def d_intra(f):
    u = unit(f)
    k = f.shape[1]
    return np.mean([np.linalg.norm(u[:, a] - u[:, b], axis=-1) for a in range(k) for b in range(a + 1, k)])


def ratios(z, h, labels):
    comp, glob = spread(z) / spread(h), global_spread(z) / global_spread(h)
    return {"compression": comp, "global_ratio": glob, "selectivity": comp / glob,
            "compression_centred": centred_spread(z) / centred_spread(h),
            "class_orbit_change": (d_inter(h, labels) / d_intra(h)) / (d_inter(z, labels) / d_intra(z))}


def embeddings(n=12, k=5, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 3
    z = rng.normal(size=(3, 8))[labels][:, None] + 0.5 * rng.normal(size=(n, k, 8)) + 2.0
    w1, w2 = rng.normal(size=(8, 6)), rng.normal(size=(6, 4))
    h1 = np.tanh(z @ w1)
    h2 = h1 @ w2 + 0.3
    return {"z": z.astype(np.float32), "h1": h1, "h2": h2, "labels": labels,
            "xi": np.linspace(0.0, 60.0, k)}


def _analyze(argv, capsys):
    code = main(["analyze", *map(str, argv)])
    return code, capsys.readouterr()


def test_npz_metrics_match_numpy_and_the_report_matches_the_json(tmp_path, capsys):
    arrays = embeddings()
    path = tmp_path / "emb.npz"
    np.savez(path, **arrays)
    out = tmp_path / "out"
    code, cap = _analyze([path, "--family", "rotation", "--boot", 60, "--seed", 4, "--level", 0.9,
                          "--out", out], capsys)
    assert code == 0, cap.err
    res = json.loads((out / "analysis.json").read_text())
    fam = res["orbits"]["families"]["rotation"]
    assert list(fam["points"]) == ["z", "h1", "h2"] and list(fam["ratios"]) == ["h1", "h2"]
    assert fam["xi"] == pytest.approx(arrays["xi"].tolist()) and fam["dims"] == {"z": 8, "h1": 6, "h2": 4}
    assert "need the model" in fam["controls"]["omitted"]
    assert "out_of_distribution" not in fam  # the heads' input is unknown unless --head-input l2
    z = arrays["z"].astype(np.float64)
    labels = arrays["labels"]
    idx = bootstrap_indices(12, 60, 4, strata=torch.from_numpy(labels)).numpy()
    drop = [np.arange(12)[np.arange(12) != j] for j in range(12)]  # the BCa acceleration's leave-one-out sets
    for p in ("h1", "h2"):
        want = ratios(z, arrays[p], labels)
        reps = [ratios(z[i], arrays[p][i], labels[i]) for i in idx]
        jack = [ratios(z[i], arrays[p][i], labels[i]) for i in drop]
        for key, value in want.items():
            est = fam["ratios"][p][key]
            assert est["value"] == pytest.approx(value, rel=1e-9), (p, key)
            ci, _, _ = bca_by_hand(value, [r[key] for r in reps], [r[key] for r in jack], labels, 0.9)
            assert est["ci"] == pytest.approx(ci, rel=1e-8), (p, key)
    src = res["source"]
    assert src["kind"] == "npz" and src["arrays"]["z"] == {"shape": [12, 5, 8], "dtype": "float32"}
    assert res["data"]["per_class"] == {"0": 4, "1": 4, "2": 4}
    assert res["orbits"]["protocol"]["bootstrap"] == "BCa, over images, stratified by class"
    assert res["tangent_metric"]["skipped"].startswith("needs the model")
    md = (out / "report.md").read_text()
    assert md.startswith(f"# headgeom analyze: {path}") and "Controls: the fresh-head" in md
    assert (out / "figures" / "orbits_rotation.png").read_bytes()[:4] == b"\x89PNG"
    row = next(ln for ln in md.splitlines() if ln.startswith("| rotation | h2 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    for text, key in zip(cells[2:6], ("compression", "global_ratio", "selectivity", "compression_centred")):
        v = float(re.match(r"(\S+) \[", text).group(1))
        assert v == pytest.approx(fam["ratios"]["h2"][key]["value"], rel=6e-4)
    assert re.search(r"^rotation\s+h2\s", cap.out, re.M)
    # report.html: the same report as one page, its figure embedded (headgeom.report.html_markdown)
    page = (out / "report.html").read_text()
    png = (out / "figures" / "orbits_rotation.png").read_bytes()
    assert "data:image/png;base64," + base64.b64encode(png).decode() in page and "<td>rotation</td><td>h2</td>" in page
    assert res["files"]["html"] == str(out / "report.html") and f"wrote {out / 'report.html'}" in cap.out


def test_heads_fed_normalised_z_are_flagged_on_request(tmp_path, capsys):
    arrays = embeddings()
    del arrays["labels"], arrays["xi"]
    path = tmp_path / "emb.npz"
    np.savez(path, **arrays)
    code, cap = _analyze([path, "--head-input", "l2", "--boot", 20, "--out", tmp_path / "o"], capsys)
    assert code == 0, cap.err
    res = json.loads((tmp_path / "o" / "analysis.json").read_text())
    fam = res["orbits"]["families"]["external"]  # the default family name
    assert list(fam["out_of_distribution"]["points"]) == ["h1", "h2"]
    cos = fam["out_of_distribution"]["points"]["h2"]["mean_pairwise_cosine"]["value"]
    u = unit(arrays["h2"]).reshape(-1, 4)
    g = u @ u.T
    assert cos == pytest.approx((g.sum() - np.trace(g)) / (g.shape[0] * (g.shape[0] - 1)), rel=1e-10)
    assert "d_inter" not in fam["points"]["z"] and res["data"]["per_class"] == {}
    md = (tmp_path / "o" / "report.md").read_text()
    assert "**Out of distribution**" in md and "no labels" in md and "out of distribution" in cap.out


def _object_array():
    return np.array([{"a": 1}], dtype=object)


@pytest.mark.parametrize("arrays, message", [
    ({"h": np.ones((4, 3, 2))}, "has no array 'z'; it holds ['h']"),
    ({"z": np.ones((12, 5)), "h": np.ones((12, 5))}, "'z' must have shape (N orbits, K steps, D_z), got (12, 5)"),
    ({"z": np.ones((4, 3, 2)), "h": np.ones((4, 6))}, "array 'h' has shape (4, 6); head points must be"),
    ({"z": np.ones((4, 3, 2)), "h": np.ones((5, 3, 2))}, "mismatched N or K: array 'h' has (N, K) = (5, 3)"),
    ({"z": np.ones((4, 3, 2)), "h": np.ones((4, 2, 2))}, "mismatched N or K: array 'h' has (N, K) = (4, 2)"),
    ({"z": np.ones((4, 3, 2)), "h": np.where(np.arange(24).reshape(4, 3, 2) == 9, np.nan, 1.0)},
     "array 'h' holds 1 NaN/inf value(s) (first at orbit 1, step 1)"),
    ({"z": np.ones((4, 3, 2)), "h": _object_array()}, "array 'h' is an object array"),
    ({"z": np.ones((4, 3, 2))}, "holds no head point"),
    ({"z": np.ones((1, 3, 2)), "h": np.ones((1, 3, 2))}, "needs N >= 2 orbits"),
    ({"z": np.ones((4, 3, 2)), "h": np.ones((4, 3, 2)), "labels": np.arange(3)}, "'labels' must have shape (N,)"),
    ({"z": np.ones((4, 3, 2)), "h": np.ones((4, 3, 2)), "labels": np.ones(4)}, "labels must be integer"),
    ({"z": np.ones((4, 3, 2)), "h": np.ones((4, 3, 2)), "labels": np.zeros(4, int)}, "a single class"),
    ({"z": np.ones((4, 3, 2)), "h": np.ones((4, 3, 2)), "xi": np.arange(4.0)}, "'xi' must have shape (K,)"),
    ({"z": np.ones((4, 3, 2)), "h": np.ones((4, 3, 2)), "xi": np.array([0.0, 1.0, np.inf])},
     "array 'xi' holds 1 NaN/inf value(s) (first at index 2)"),
    ({"z": np.ones((4, 3, 2)), "h": np.full((4, 3, 2), "a")}, "embeddings must be real numbers"),
])
def test_malformed_npz_exits_2_with_one_line(tmp_path, capsys, arrays, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    code, cap = _analyze([path, "--boot", 10, "--out", tmp_path / "o"], capsys)
    assert code == 2 and message in cap.err, cap.err
    assert len(cap.err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_files_that_are_not_npz_archives(tmp_path, capsys):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip at all")
    single = tmp_path / "single.npz"
    with open(single, "wb") as fh:
        np.save(fh, np.ones((2, 3, 4)))
    for path, message in ((junk, "is not a readable .npz archive"), (single, "holds a single array"),
                          (tmp_path / "missing.npz", "does not exist")):
        code, cap = _analyze([path], capsys)
        assert code == 2 and message in cap.err, cap.err
    code, cap = _analyze([tmp_path / "x.npz", "--families", "hue"], capsys)
    assert code == 2 and "name their family with --family" in cap.err
    code, cap = _analyze([tmp_path / "x.npz", "--family", "a/b"], capsys)
    assert code == 2 and "--family must be letters" in cap.err
    code, cap = _analyze([tmp_path / "model.pt", "--family", "rotation"], capsys)
    assert code == 2 and "--family names the orbits of an .npz" in cap.err


# ---- the conversion in docs/analyze.md of the authors' layout

def _docs_conversion() -> dict:
    blocks = re.findall(r"```python\n(.*?)```", ANALYZE_DOC.read_text(encoding="utf-8"), flags=re.S)
    code = next(b for b in blocks if "def authors_orbits_to_npz" in b)
    namespace: dict = {}
    exec(compile(code, "docs/analyze.md", "exec"), namespace)
    return namespace


def _authors_layout(n=6, k=4, seed=1) -> tuple[dict, dict]:
    """A dict like experiments.py's run_orbit_visualization_experiment returns: flat (N·K, D)
    arrays, each orbit's K steps contiguous and in order; here the orbits out of id order."""
    rng = np.random.default_rng(seed)
    z, h = rng.normal(size=(n, k, 5)).astype(np.float32), rng.normal(size=(n, k, 7)).astype(np.float32)
    labels, angles = np.repeat([0, 8, 3], n // 3), np.linspace(0, 330, k)
    rows = (rng.permutation(n)[:, None] * k + np.arange(k)).reshape(-1)  # orbit blocks shuffled
    flat = {"orbits_z": z.reshape(n * k, 5)[rows], "orbits_h": h.reshape(n * k, 7)[rows],
            "orbit_labels": np.repeat(labels, k)[rows], "orbit_ids": np.repeat(np.arange(n), k)[rows],
            "orbit_angles": np.tile(angles, n)[rows], "selected_classes": [0, 8, 3],
            "class_names": ["airplane", "ship", "cat"], "num_rotations": k, "num_classes": 3,
            "images_per_class": n // 3, "dataset": "cifar10"}
    return flat, {"z": z, "h": h, "labels": labels, "xi": angles}


def test_the_docs_convert_the_authors_layout_without_running_pickled_code(tmp_path):
    ns = _docs_conversion()
    flat, want = _authors_layout()
    src, dst = tmp_path / "orbit_visualization.npy", tmp_path / "orbits.npz"
    np.save(src, flat)  # a pickled dict, as the authors wrote it
    ns["authors_orbits_to_npz"](src, dst)
    ext = load_orbit_npz(dst)
    assert list(ext.features) == ["z", "h"]
    np.testing.assert_array_equal(ext.features["z"].numpy(), want["z"])
    np.testing.assert_array_equal(ext.features["h"].numpy(), want["h"])
    assert ext.labels.tolist() == want["labels"].tolist() and ext.xi == pytest.approx(want["xi"].tolist())


CALLED = []


def _side_effect():
    CALLED.append(True)
    return "ran"


class _Payload:
    def __reduce__(self):
        return (_side_effect, ())


def test_docs_conversion_refuses_any_other_global(tmp_path):
    ns = _docs_conversion()
    flat, _ = _authors_layout()
    flat["payload"] = _Payload()
    src = tmp_path / "evil.npy"
    np.save(src, flat)
    assert pickle.loads(pickle.dumps(_Payload())) == "ran" and CALLED == [True]  # it would run
    CALLED.clear()
    with pytest.raises(pickle.UnpicklingError, match="refusing .*_side_effect"):
        ns["authors_orbits_to_npz"](src, tmp_path / "out.npz")
    assert CALLED == [] and not (tmp_path / "out.npz").exists()
