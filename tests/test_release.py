"""The release a user installs: ``python -m build`` makes a wheel and an sdist that ``twine check
--strict`` accepts; the wheel holds the package (every file under src/headgeom) and nothing of the
tests; installed into a fresh venv (torch first, as the README's setup does), its ``headgeom``
runs ``--help`` and the README's ``headgeom hessian`` example there, importing the installed copy.
"""
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

import headgeom

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "headgeom"
TORCH = "torch==2.13.0"  # the README's setup line: the CPU build, before the package


def _run(cmd, **kw):
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert out.returncode == 0, f"{cmd} exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", out, ROOT])
    return out


@pytest.mark.slow
def test_wheel_and_sdist_pass_twine_and_the_wheel_holds_the_package_only(dist):
    wheel, = dist.glob("headgeom-*.whl")
    sdist, = dist.glob("headgeom-*.tar.gz")
    assert wheel.name.startswith(f"headgeom-{headgeom.__version__}-") and f"-{headgeom.__version__}." in sdist.name
    assert "PASSED" in _run([sys.executable, "-m", "twine", "check", "--strict", wheel, sdist])
    names = zipfile.ZipFile(wheel).namelist()
    package = {n for n in names if not n.startswith(f"headgeom-{headgeom.__version__}.dist-info/")}
    source = {p.relative_to(PACKAGE.parent).as_posix() for p in PACKAGE.rglob("*")
              if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    assert package == source  # every module and data file the package reads at run time, nothing else
    assert not [n for n in names if "tests/" in n or Path(n).name.startswith(("test_", "conftest"))]


@pytest.mark.slow
def test_the_wheel_installed_in_a_fresh_venv_runs_the_cli(dist, tmp_path):
    wheel, = dist.glob("headgeom-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    pip = [bindir / "python", "-m", "pip", "install", "-q"]
    _run(pip + [TORCH], env=env, cwd=tmp_path)
    _run(pip + [wheel], env=env, cwd=tmp_path)
    where = _run([bindir / "python", "-c", "import headgeom; print(headgeom.__file__, headgeom.__version__)"],
                 env=env, cwd=tmp_path).split()
    assert Path(where[0]).is_relative_to(env_dir) and where[1] == headgeom.__version__  # the installed copy
    assert "hessian" in _run([bindir / "headgeom", "--help"], env=env, cwd=tmp_path)
    out = _run([bindir / "headgeom", "hessian", "--head", "512-2048-2048:silu", "--objective", "negative_cosine",
                "--batch-size", "2"], env=env, cwd=tmp_path)
    assert "H_eff" in out
