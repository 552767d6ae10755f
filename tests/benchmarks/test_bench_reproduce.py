"""benchmarks/bench_reproduce.py's readers (no run, no timings): GNU time's report parsed into seconds and
bytes, and the per-experiment table of two results.json files with its sums and ratios."""
import json
import sys
from pathlib import Path

import pytest


TIME_REPORT = """\tCommand being timed: "python -m headgeom reproduce"
\tUser time (seconds): 301.25
\tSystem time (seconds): 4.75
\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02:03.5
\tMaximum resident set size (kbytes): 734003
\tExit status: 0
"""


def test_parse_time_reads_cpu_wall_and_peak_rss(benchmark_script):
    got = benchmark_script("bench_reproduce").parse_time(TIME_REPORT)
    assert got["cpu_s"] == 301.25 + 4.75 and got["wall_s"] == 3600 + 2 * 60 + 3.5
    assert got["peak_rss_kb"] == 734003 and got["exit"] == 0
    short = benchmark_script("bench_reproduce").parse_time("\tElapsed (wall clock) time (h:mm:ss or m:ss): 2:05.25\n")
    assert short == {"wall_s": 125.25}  # no CPU fields: no cpu_s


def test_table_sums_both_runs_and_gives_the_ratio_per_experiment(benchmark_script, tmp_path):
    def results(name, exps):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"experiments": exps}))
        return path

    base = results("base", {"C11": {"n_cells": 6, "cells_elapsed_s": 200.0}, "C9": {"n_cells": 4, "cells_elapsed_s": 100.0}})
    new = results("new", {"C11": {"n_cells": 6, "cells_elapsed_s": 50.0, "cells_cpu_s": 40.0},
                          "C9": {"n_cells": 4, "cells_elapsed_s": 75.0, "cells_cpu_s": 60.0}})
    rows = benchmark_script("bench_reproduce").table(base, new)
    assert rows[2] == "| C9 | 4 | 100.0 | 75.0 | 0.75 | - | 60.0 |"  # natural order: C9 before C11
    assert rows[3] == "| C11 | 6 | 200.0 | 50.0 | 0.25 | - | 40.0 |"
    assert rows[-1] == "| all | | 300.0 | 125.0 | 0.42 | 0.0 | 100.0 |"


FAKE_PYTHON = """#!/bin/sh
# stands in for a checkout's python: writes the results.json a finished reproduce leaves in --out
while [ $# -gt 0 ]; do [ "$1" = "--out" ] && out="$2"; shift; done
mkdir -p "$out" && echo '{"experiments": {"C1": {"n_cells": 1, "cells_elapsed_s": 1.0}}}' > "$out/results.json"
"""


@pytest.mark.skipif(not Path("/usr/bin/time").exists(), reason="needs GNU time (Debian package time)")
def test_a_relative_out_folder_holds_both_runs(benchmark_script, tmp_path, monkeypatch, capsys):
    """Each checkout's command runs in the --out folder, so a relative --out must not be read from there."""
    for side in ("base", "new"):
        (tmp_path / side / "src" / "headgeom").mkdir(parents=True)
        python = tmp_path / side / ".venv" / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text(FAKE_PYTHON)
        python.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["bench_reproduce.py", "--base", "base", "--new", "new", "--out", "bench-out",
                                      "--one-after-the-other"])
    assert benchmark_script("bench_reproduce").main() == 0
    for side in ("base", "new"):
        assert (tmp_path / "bench-out" / side / "results.json").is_file()
        assert "Exit status: 0" in (tmp_path / "bench-out" / f"{side}.time").read_text()
    assert "| C1 | 1 | 1.0 | 1.0 | 1.00 |" in capsys.readouterr().out
