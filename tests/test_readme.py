"""The README's Python example runs as written, and its commands match .ci/run."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_example_runs():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no Python example"
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})


def test_ci_runs_the_readme_setup_and_test_commands():
    text = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    setup_section = re.search(r"## Setup\n(.*?)\n## ", text, flags=re.S).group(1)
    setups = [b.strip() for b in re.findall(r"```bash\n(.*?)\n```", setup_section, flags=re.S)]
    test = re.search(r"## Tests.*?```bash\n(.*?)\n```", text, flags=re.S).group(1).strip()
    assert len(setups) == 2  # the setup, then the cluster tests' set-up
    for setup in setups:
        assert setup in ci
    assert ci.index(setups[0]) < ci.index(setups[1]) < ci.index(test.split("&&")[-1].strip())
    assert test.split("&&")[-1].strip() in ci
