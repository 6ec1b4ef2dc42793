"""The README's Python section runs as written (in a fresh interpreter, in a scratch folder)."""
import os
import re
import subprocess
import sys

from conftest import REPO


def test_readme_python_example_runs(tmp_path):
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ})
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "gradient.npy").exists()
    assert len(r.stdout.split()) >= 4
