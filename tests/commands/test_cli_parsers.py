"""The parsers: built without torch, one vocabulary with deprecated aliases, an example in every
help page (each one parses), names that match their registries, the head-spec grammar."""
from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from headgeom.cli import build_parser, main
from headgeom.commands import heads as heads_cmd
from headgeom.commands import vocabulary as v
from script_modules import tool

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "numpy", "scipy", "matplotlib")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_building_the_parser_and_every_help_page_import_no_heavy_module():
    """`headgeom --help` must not wait for torch (seconds); run in a fresh interpreter."""
    code = f"""
import json, sys
from headgeom.cli import build_parser, main
names = list({list(_subcommands(build_parser()))!r})
for argv in [["--help"]] + [[n, "--help"] for n in names]:
    try:
        main(argv)
    except SystemExit as e:
        assert e.code == 0, argv
print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def _examples(help_text: str) -> list[str]:
    """The example command lines of a help page, continuation lines joined, comments dropped."""
    tail = re.sub(r" \\\n\s+", " ", help_text.split("\nexamples:\n", 1)[1])
    return [line.split("  #")[0].strip() for line in tail.splitlines() if line.startswith("  headgeom")]


def test_every_help_page_has_examples_that_parse_with_current_names(capsys):
    parser = build_parser()
    pages = {"headgeom": parser, **_subcommands(parser)}
    for name, page in pages.items():
        examples = _examples(page.format_help())
        assert examples, f"`{name} --help` has no example"
        for line in examples:
            argv = shlex.split(line)[1:]
            build_parser().parse_args(argv)
            assert "deprecated" not in capsys.readouterr().err, line


@pytest.mark.parametrize("old,new", [
    (["hessian", "--head", "4-6-3", "--objective", "mse", "--batch", "5"],
     ["hessian", "--head", "4-6-3", "--objective", "mse", "--batch-size", "5"]),
    (["train", "--out", "r", "--no-progress"], ["train", "--out", "r", "--quiet"]),
    (["reproduce", "--no-progress"], ["reproduce", "--quiet"]),
    (["theory", "--no-progress"], ["theory", "--quiet"]),
    (["eval", "run", "--out", "e.json"], ["eval", "run", "--json", "e.json"]),
    (["eval", "run", "--l2-input"], ["eval", "run", "--head-input", "both"]),
])
def test_old_option_names_still_work_with_a_one_line_note(old, new, capsys):
    old_option = next(a for a in reversed(old) if a.startswith("--"))
    got, want = build_parser().parse_args(old), build_parser().parse_args(new)
    err = capsys.readouterr().err
    assert vars(got) == vars(want)
    assert err.count("\n") == 1 and f"{old_option} is deprecated" in err
    build_parser().parse_args(new)
    assert capsys.readouterr().err == ""
    assert f"{old_option} " not in _subcommands(build_parser())[old[0]].format_usage()  # hidden from help


def test_the_vocabulary_is_generated_from_the_registries():
    """commands/vocabulary.py is what tools/write_vocabulary.py renders from the registries now: a
    name added to a registry and not regenerated fails here, naming the command to run."""
    vocabulary = tool("write_vocabulary")
    text = (ROOT / "src" / "headgeom" / "commands" / "vocabulary.py").read_text(encoding="utf-8")
    assert text == vocabulary.render(), "src/headgeom/commands/vocabulary.py is stale: run python tools/write_vocabulary.py"
    from headgeom.methods.registry import METHODS
    from headgeom.objectives.registry import OBJECTIVES
    from headgeom.train.loggers import LOGGERS

    # the registries the issue names, read back from the file as the parsers see it
    assert (v.METHODS, v.OBJECTIVES, v.LOGGERS) == (tuple(METHODS), tuple(OBJECTIVES), tuple(LOGGERS))
    assert {name for name, *_ in vocabulary.entries()} == {n for n in dir(v) if n.isupper()}


def test_the_generator_notices_a_stale_file(tmp_path, monkeypatch):
    vocabulary = tool("write_vocabulary")
    stale = tmp_path / "vocabulary.py"
    stale.write_text(vocabulary.render().replace('"mocov3"', '"mocov2"', 1), encoding="utf-8")  # a name not yet regenerated
    monkeypatch.setattr(vocabulary, "TARGET", stale)
    monkeypatch.setattr(vocabulary, "ROOT", tmp_path)
    assert vocabulary.main(["--check"]) == 1
    assert vocabulary.main([]) == 0 and vocabulary.main(["--check"]) == 0
    assert stale.read_text(encoding="utf-8") == vocabulary.render()


def test_every_registered_objective_and_method_is_accepted_by_the_command_line():
    from headgeom.objectives.registry import OBJECTIVES

    pages = _subcommands(build_parser())
    hessian = " ".join(pages["hessian"].format_help().split())
    assert ", ".join(OBJECTIVES) in hessian
    for name in OBJECTIVES:
        assert build_parser().parse_args(["hessian", "--head", "4-8-3", "--objective", name]).objective == name
    train = " ".join(pages["train"].format_help().split())
    assert ", ".join(v.METHODS) in train and "/".join(v.PREDICTOR_METHODS) in train


def test_reproduce_help_lists_the_experiment_ids():
    pages = _subcommands(build_parser())
    reproduce, theory = (" ".join(pages[n].format_help().split()) for n in ("reproduce", "theory"))
    assert ", ".join(v.EXPERIMENT_IDS) in reproduce
    assert ", ".join(v.THEORY_IDS) in theory and "GRID" not in theory


def test_heads_prints_the_grammar_and_every_example_builds(capsys):
    from headgeom.heads import HeadSpec
    from headgeom.heads.cli import resolve_spec

    assert main(["heads"]) == 0
    text = capsys.readouterr().out
    for word in ("WIDTHS[:ACTIVATION][:bn|ln][:OPTION...]", "last=bn_noaffine", "nolastbias", "dino=B",
                 "nonormlast", "softplus=5", "d-", *v.HEAD_PRESETS):
        assert word in text, word
    printed = re.findall(r"^  (\S+)  ", text.split("\nexamples:\n")[1], flags=re.M)
    assert printed == [s for s, _ in heads_cmd.EXAMPLES]
    for spec in printed:
        in_dim = 512 if spec.startswith("d-") else None
        assert isinstance(resolve_spec(spec, in_dim), HeadSpec)
        assert main(["heads", spec, *(["--in-dim", "512"] if in_dim else [])]) == 0, spec
    shown = capsys.readouterr().out
    assert "512-2048-2048:silu:bn:last=bn:nobias  (" in shown and "Linear(in_features=512" in shown


def test_heads_errors_are_one_line(capsys):
    assert main(["heads", "d-64-8"]) == 2
    assert "--in-dim" in capsys.readouterr().err
    assert main(["heads", "64-8:wobble"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "wobble" in err
    assert main(["heads", "paper_projector", "--in-dim", "128"]) == 0
    assert "128-2048-2048" in capsys.readouterr().out


def test_a_missing_checkpoint_says_when_last_pt_is_written(tmp_path, capsys):
    from headgeom.train import load_checkpoint

    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    assert main(["checkpoint", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    with pytest.raises(FileNotFoundError) as info:
        load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")
    for text in (err, str(info.value)):
        assert "every epoch" in text and "--checkpoint-every" in text and "--max-steps" in text
