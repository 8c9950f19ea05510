"""The distribution has a name of its own (issue 45 item 2): `cfgopt` on the package index is an unrelated project
(0.8.0, "You only configure your deep learning experiment once"), so no install line in a doc or a message may name
it, and `cfgopt server` says which extra of which distribution to install when pygls is missing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from repo_paths import ROOT

from cfgopt.commands.server import DISTRIBUTION

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the project's own dependency
    import tomli as tomllib

# What a user reads: the docs, the messages in the code, the scripts, the hooks. tests/data and fixtures hold
# other projects' files as they are.
READ = ("README.md", "CONTRIBUTING.md", ".pre-commit-hooks.yaml", "docs", "rules", "cfgopt", "scripts", "bench", ".ci")
SUFFIXES = {".md", ".py", ".yaml", ".toml", ".sh", ".txt", ""}
INSTALL = re.compile(r"\b(?:pip3?|pipx|uv pip|uv tool|python3? -m pip) install\b([^`\n;&|]*)")  # to the command's end
# `cfgopt`, `cfgopt[server]`, `cfgopt==0.1`, `"cfgopt>=0.1"`: the index's project, not this one
BARE = re.compile(r"""^["']?cfgopt(?:\[[^\]]*\])?(?:[=<>!~].*)?["']?$""")


def _texts() -> list[tuple[Path, str]]:
    out = []
    for name in READ:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            if file.suffix in SUFFIXES and "__pycache__" not in file.parts:
                out.append((file, file.read_text(encoding="utf-8", errors="replace")))
    return out


def bare_index_names(text: str) -> list[str]:
    """The install lines of `text` that name the index's `cfgopt` (an extra of it included)."""
    found = [m.group(0) for m in INSTALL.finditer(text) if any(BARE.match(w) for w in m.group(1).split())]
    return found + re.findall(r"""["'`\s]cfgopt\[[^\]]*\]""", text)


def test_the_checker_finds_the_index_name() -> None:
    for line in (
        "pip install cfgopt",
        "pip install 'cfgopt[server]'",
        "pipx install cfgopt==0.1",
        "uv pip install -U cfgopt",
    ):
        assert bare_index_names(f"run `{line}` first"), line
    for line in (
        "pip install .",
        "pip install '.[server]'",
        "pip install -e '.[test,oracle]'",
        "pip install cfgopt-lint",
    ):
        assert not bare_index_names(f"run `{line}` first"), line


def test_no_doc_or_message_installs_the_index_cfgopt() -> None:
    found = [(str(path.relative_to(ROOT)), hit) for path, text in _texts() for hit in bare_index_names(text)]
    assert not found, found


def test_the_distribution_name_is_this_projects() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION != "cfgopt"
    assert project["scripts"] == {"cfgopt": "cfgopt.cli:main"}  # the command keeps its name
    assert "server" in project["optional-dependencies"]
    assert "'.[server]'" in (ROOT / "README.md").read_text()  # the set-up names the server extra


def test_server_without_pygls_names_the_extra_to_install() -> None:
    """pygls and lsprotocol made unimportable (as in a plain install): one line naming this distribution's extra."""
    code = (
        "import sys; sys.modules['pygls'] = sys.modules['lsprotocol'] = None\n"
        "from cfgopt.cli import main; sys.exit(main(['server']))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    message = run.stderr.strip()
    assert run.returncode != 0 and "\n" not in message and "Traceback" not in message, message
    assert DISTRIBUTION in message and "'.[server]'" in message and not bare_index_names(message), message
