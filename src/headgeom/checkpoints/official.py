"""The official SSL checkpoint files headgeom knows by name, and their sha256 where it is known.

No sum is listed that headgeom could not verify: no checksum of the official releases (DINO,
VICReg, Barlow Twins, SimSiam) could be checked when this table was written, so their ``sha256``
is ``None`` and a comparison reports ``"unknown"`` together with the file's own sum for the user
to record (and to add here once verified against a download). Files named in
torch.hub's convention ``<name>-<hex>.<ext>`` (torchvision's ``resnet50-0676ba61.pth``) carry
the first hex digits of their sha256 in the name, which torch.hub itself checks; those are
compared by prefix.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["OfficialFile", "OFFICIAL_FILES", "ShaCheck", "check_sha256"]


@dataclass(frozen=True)
class OfficialFile:
    """One released checkpoint: its release id, where it comes from and its sha256 if known."""

    filename: str
    release: str
    source: str
    sha256: str | None = None


OFFICIAL_FILES: dict[str, OfficialFile] = {f.filename: f for f in (
    OfficialFile("dino_deitsmall16_pretrain_full_checkpoint.pth", "dino_vit",
                 "https://dl.fbaipublicfiles.com/dino/dino_deitsmall16_pretrain/"
                 "dino_deitsmall16_pretrain_full_checkpoint.pth"),
    OfficialFile("dino_resnet50_pretrain_full_checkpoint.pth", "dino_resnet50",
                 "https://dl.fbaipublicfiles.com/dino/dino_resnet50_pretrain/"
                 "dino_resnet50_pretrain_full_checkpoint.pth"),
    OfficialFile("resnet50_fullckpt.pth", "vicreg", "https://dl.fbaipublicfiles.com/vicreg/resnet50_fullckpt.pth"),
    OfficialFile("checkpoint.pth", "barlow_twins",
                 "https://dl.fbaipublicfiles.com/barlowtwins/ljng/checkpoint.pth (facebookresearch/barlowtwins "
                 "README, ResNet-50 full checkpoint; older README versions link "
                 "ep1000_bs2048_lrw0.2_lrb0.0048_lambd0.0051/checkpoint.pth)"),
    OfficialFile("checkpoint_0099.pth.tar", "simsiam", "facebookresearch/simsiam README, 100-epoch pre-trained model"),
)}

_HUB_NAME = re.compile(r"-([a-f0-9]{8,64})\.(pth|pt|pth\.tar)$")


@dataclass(frozen=True)
class ShaCheck:
    """Result of comparing a file's sha256 with the official one: match, mismatch or unknown."""

    status: str
    sha256: str
    expected: str | None
    message: str


def check_sha256(filename: str, sha256: str, release: str | None = None) -> ShaCheck:
    """Compare ``sha256`` of the file called ``filename`` with what is known about it.

    ``release`` (the detected one) guards against a generic name such as ``checkpoint.pth``
    being taken for an official file of another release.
    """
    known = OFFICIAL_FILES.get(filename)
    if known is not None and (release is None or known.release == release):
        if known.sha256 is None:
            return ShaCheck("unknown", sha256, None,
                            f"{filename} is the official {known.release} file name ({known.source}), but headgeom "
                            f"knows no verified official sha256 for it; record this file's sha256 {sha256} "
                            f"with your results.")
        if known.sha256 == sha256:
            return ShaCheck("match", sha256, known.sha256, f"sha256 matches the official {known.release} file.")
        return ShaCheck("mismatch", sha256, known.sha256,
                        f"sha256 {sha256} differs from the official {known.sha256} of {filename}: the file is "
                        f"damaged or not the official release; download it again.")
    m = _HUB_NAME.search(filename)
    if m is not None:
        prefix = m.group(1)
        if sha256.startswith(prefix):
            return ShaCheck("match", sha256, prefix,
                            f"sha256 starts with {prefix}, the hash torch.hub encodes in the file name.")
        return ShaCheck("mismatch", sha256, prefix,
                        f"sha256 {sha256} does not start with {prefix}, the hash encoded in the file name "
                        f"{filename}: the file is damaged or renamed; download it again.")
    return ShaCheck("unknown", sha256, None,
                    f"no official sha256 known for {filename}; record this file's sha256 {sha256} with your results.")
