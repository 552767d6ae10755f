"""The official checkpoint files C10 reads (docs/paper.md §2 C10): which ones, where they are
expected, and what to tell the user.

docs/paper.md §3 "Pretrained" and §4 pitfall 10: the analysis needs the *full* checkpoints (backbone
and projection head; the torch.hub entries drop the heads). The four files keep the names the
official releases give them and are looked up directly in one directory:

    DIR/dino_deitsmall16_pretrain_full_checkpoint.pth   DINO ViT-S/16 (teacher and student)
    DIR/dino_resnet50_pretrain_full_checkpoint.pth      DINO ResNet-50
    DIR/resnet50_fullckpt.pth                           VICReg ResNet-50
    DIR/checkpoint.pth                                  Barlow Twins ResNet-50

DIR is ``C10Config.checkpoints_dir`` when set, else ``$HEADGEOM_CHECKPOINTS`` (which
``headgeom reproduce --checkpoints DIR`` sets). The download addresses are the "full checkpoint"
links of the official READMEs (facebookresearch/dino, /vicreg, /barlowtwins); headgeom does not
download them. The Barlow Twins README has moved its link between versions (``barlowtwins/ljng/``
now; ``barlowtwins/ep1000_bs2048_lrw0.2_lrb0.0048_lambd0.0051/`` earlier), always to a file named
``checkpoint.pth``; whichever is placed, the loader checks that it is a Barlow Twins checkpoint and
its sha256 is recorded in the report.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headgeom.checkpoints.official import OFFICIAL_FILES

__all__ = ["CHECKPOINTS_ENV", "EXPECTED_FILES", "ExpectedFile", "checkpoints_dir", "file_cell",
           "placement_message", "placement_table"]

CHECKPOINTS_ENV = "HEADGEOM_CHECKPOINTS"


@dataclass(frozen=True)
class ExpectedFile:
    """One checkpoint C10 reads: its release id (headgeom.checkpoints.detect), method, file name."""

    release: str
    method: str  # "dino", "vicreg" or "barlow_twins": the claim it counts for
    filename: str
    label: str
    url: str

    @property
    def source(self) -> str:
        """What headgeom.checkpoints.official records about the file ('' if nothing)."""
        known = OFFICIAL_FILES.get(self.filename)
        return known.source if known is not None and known.release == self.release else ""


EXPECTED_FILES: dict[str, ExpectedFile] = {f.release: f for f in (
    ExpectedFile("dino_vit", "dino", "dino_deitsmall16_pretrain_full_checkpoint.pth", "DINO ViT-S/16",
                 "https://dl.fbaipublicfiles.com/dino/dino_deitsmall16_pretrain/"
                 "dino_deitsmall16_pretrain_full_checkpoint.pth"),
    ExpectedFile("dino_resnet50", "dino", "dino_resnet50_pretrain_full_checkpoint.pth", "DINO ResNet-50",
                 "https://dl.fbaipublicfiles.com/dino/dino_resnet50_pretrain/"
                 "dino_resnet50_pretrain_full_checkpoint.pth"),
    ExpectedFile("vicreg", "vicreg", "resnet50_fullckpt.pth", "VICReg ResNet-50",
                 "https://dl.fbaipublicfiles.com/vicreg/resnet50_fullckpt.pth"),
    ExpectedFile("barlow_twins", "barlow_twins", "checkpoint.pth", "Barlow Twins ResNet-50",
                 "https://dl.fbaipublicfiles.com/barlowtwins/ljng/checkpoint.pth"),
)}


def checkpoints_dir(configured: str | None) -> Path | None:
    """The checkpoint directory: ``configured`` if set, else ``$HEADGEOM_CHECKPOINTS``, else None."""
    if configured:
        return Path(configured).expanduser().resolve()
    env = os.environ.get(CHECKPOINTS_ENV, "")
    return Path(env).expanduser().resolve() if env else None


def file_cell(release: str, directory: Path | None) -> dict[str, Any]:
    """The cell of one checkpoint: where it is expected and, if present, its size and mtime.

    Size and mtime are part of the cell (and so of its run-directory key): a rerun after the
    file appears, or is replaced, gets a new cell instead of reusing a finished "absent" one.
    """
    if release not in EXPECTED_FILES:
        raise ValueError(f"C10 has no checkpoint for release {release!r}; choose from {sorted(EXPECTED_FILES)}")
    exp = EXPECTED_FILES[release]
    cell: dict[str, Any] = {"release": release, "file": exp.filename,
                            "dir": None if directory is None else str(directory),
                            "present": False, "size": None, "mtime_ns": None}
    if directory is not None:
        path = directory / exp.filename
        if path.is_file():
            st = path.stat()
            cell.update(present=True, size=int(st.st_size), mtime_ns=int(st.st_mtime_ns))
    return cell


def _where(directory: str | Path | None, filename: str) -> str:
    if directory is None:
        return f"DIR/{filename}"
    return str(Path(directory) / filename)


def placement_message(releases: list[str], directory: str | Path | None, urls: bool = True) -> str:
    """What to place where, for the checkpoints in ``releases`` that are absent (one item each);
    ``urls`` adds each file's official download address."""
    if not releases:
        return ""
    how = ("no checkpoint directory is set: pass `headgeom reproduce --checkpoints DIR` (or set "
           f"{CHECKPOINTS_ENV}=DIR) and place" if directory is None else
           f"place in the checkpoint directory {directory}")
    items = [f"{EXPECTED_FILES[r].label} full checkpoint `{EXPECTED_FILES[r].filename}` at "
             f"`{_where(directory, EXPECTED_FILES[r].filename)}`"
             + (f" (download {EXPECTED_FILES[r].url})" if urls else "") for r in releases]
    return (f"{len(releases)} official checkpoint file(s) missing; {how}: " + "; ".join(items)
            + ". Keep the official file names; then rerun the same command.")


def placement_table(cells: list[dict[str, Any]]) -> str:
    """Markdown table: checkpoint, file name, where it is expected, present (size), official URL."""
    lines = ["| checkpoint | file | expected at | present | official download |", "|---|---|---|---|---|"]
    for cell in cells:
        exp = EXPECTED_FILES[cell["release"]]
        present = f"yes ({cell['size'] / 2**20:.1f} MiB)" if cell.get("present") else "**no**"
        lines.append(f"| {exp.label} | `{exp.filename}` | `{_where(cell.get('dir'), exp.filename)}` | {present} "
                     f"| {exp.url} |")
    return "\n".join(lines)
