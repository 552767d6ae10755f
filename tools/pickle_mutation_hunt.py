"""Mutate the pickles of the authors' released .npy dicts byte by byte and load each with headgeom's
plain-data unpickler, to find inputs that crash the interpreter or raise outside the reader's errors.

    python tools/pickle_mutation_hunt.py RELEASED_DIR --start 0 --count 3000

Example ``seed`` changes 1-6 random bytes (70 % of them within the first 400 bytes, where the opcodes,
dtype states and length fields are) of one of three released pickles. The last seed tried is written
to ``--last`` before each load, so that a crash (which ends the process) names its example. Run it
under a memory limit (``ulimit -v 8000000``): a damaged length field may ask for any size. Exit
status 1 when an exception outside the expected ones escaped (printed), else 0. BENCHMARKS.md
("Fuzzing") records the runs.
"""
from __future__ import annotations

import argparse
import io
import pickle
import random
import struct
import sys
import warnings
from pathlib import Path

import numpy as np

from headgeom.data.safe_pickle import SafeUnpickler

FILES = ("results/cifar10/resnet18/collapse_results.npy", "results/cifar10/resnet18/curvature_results.npy",
         "results/cifar10/resnet18/guillotine_results.npy")
EXPECTED = (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError,
            MemoryError, OverflowError, struct.error)  # what the released reader turns into one line


def pickles(released: Path) -> list[bytes]:
    """The pickle after the .npy header of each file."""
    out = []
    for name in FILES:
        fh = io.BytesIO((released / name).read_bytes())
        version = np.lib.format.read_magic(fh)
        (np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0)(fh)
        out.append(fh.read())
    return out


def mutated(originals: list[bytes], seed: int) -> bytes:
    rng = random.Random(seed)
    data = bytearray(rng.choice(originals))
    for _ in range(rng.randint(1, 6)):
        data[rng.randrange(min(len(data), 400 if rng.random() < 0.7 else len(data)))] = rng.randrange(256)
    return bytes(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("released", type=Path, help="the released results (headgeom released fetch DIR)")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--last", type=Path, default=Path("pickle_hunt_last_seed.txt"))
    args = parser.parse_args(argv)
    originals = pickles(args.released)
    escaped = 0
    warnings.simplefilter("ignore")  # numpy's deprecation warnings on damaged dtype strings
    for seed in range(args.start, args.start + args.count):
        args.last.write_text(f"{seed}\n")
        try:
            SafeUnpickler(io.BytesIO(mutated(originals, seed)), encoding="latin1").load()
        except EXPECTED:
            pass
        except Exception as err:  # noqa: BLE001 - what the hunt is for
            escaped += 1
            print(f"seed {seed}: {type(err).__name__}: {err}", file=sys.stderr)
    print(f"seeds {args.start}..{args.start + args.count - 1}: {args.count} examples, {escaped} escaped")
    return 1 if escaped else 0


if __name__ == "__main__":
    sys.exit(main())
