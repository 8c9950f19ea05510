"""`import_pathlib` (cfgopt/text/lean_pathlib.py): pathlib imported without `urllib.parse` before Python 3.13, as
3.13 imports it; `Path.as_uri()` and a later `import urllib.parse` answer as before; nothing is done where a
module is imported already; a pathlib that asks `urllib.parse` for more is imported the ordinary way. Each case
runs in a fresh interpreter: the test process has imported both modules long ago."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from rule_cases import ROOT

EAGER_PATHLIB = sys.version_info < (3, 13)  # before 3.13 pathlib imports urllib.parse at its top


def _run(code: str, *, path: str | None = None) -> list[str]:
    """The lines a fresh interpreter prints running `code` with the repository's package (and `path` before it) on
    its sys.path. Without `site` (`-S`): an editable install's .pth finder imports pathlib before any code runs."""
    first = [p for p in (path, str(ROOT)) if p]
    prefix = f"import sys; sys.path[:0] = {first!r}\n"
    run = subprocess.run(
        [sys.executable, "-S", "-c", prefix + textwrap.dedent(code)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.splitlines()


def test_pathlib_without_urllib_parse_and_as_uri_unchanged() -> None:
    lines = _run(
        """
        import sys
        from cfgopt.text.lean_pathlib import import_pathlib
        import_pathlib()
        print("pathlib" in sys.modules, "urllib.parse" in sys.modules, "ipaddress" in sys.modules)
        from pathlib import Path, PurePosixPath
        print(Path("/a b/c%d").as_uri(), PurePosixPath("/é").as_uri())
        """
    )
    if EAGER_PATHLIB:
        assert lines[0] == "True False False"
    assert lines[1] == "file:///a%20b/c%25d file:///%C3%A9"


def test_a_later_import_of_urllib_parse_is_the_real_module() -> None:
    lines = _run(
        """
        import sys
        import cfgopt  # the package calls import_pathlib first
        import urllib.parse
        print(urllib.parse.urlsplit("http://h/p?q").query, urllib.parse.__file__.endswith("parse.py"))
        print(sys.modules["urllib.parse"] is urllib.parse, "Only" not in (urllib.parse.__doc__ or "")[:4])
        """
    )
    assert lines == ["q True", "True True"]


@pytest.mark.skipif(not EAGER_PATHLIB, reason="Python 3.13 and later import pathlib this way themselves")
def test_importing_cfgopt_imports_neither_urllib_parse_nor_ipaddress() -> None:
    lines = _run("import sys, cfgopt; print('urllib.parse' in sys.modules, 'ipaddress' in sys.modules)")
    assert lines == ["False False"]


@pytest.mark.skipif(not EAGER_PATHLIB, reason="Python 3.13 and later import pathlib this way themselves")
def test_nothing_is_done_where_urllib_parse_is_imported_already() -> None:
    lines = _run(
        """
        import urllib.parse
        from cfgopt.text.lean_pathlib import import_pathlib
        import_pathlib()
        import pathlib
        print(pathlib.urlquote_from_bytes is urllib.parse.quote_from_bytes)
        """
    )
    assert lines == ["True"]


@pytest.mark.skipif(not EAGER_PATHLIB, reason="Python 3.13 and later import pathlib this way themselves")
def test_a_pathlib_asking_urllib_parse_for_more_is_imported_the_ordinary_way(tmp_path) -> None:
    (tmp_path / "pathlib.py").write_text(
        "from urllib.parse import quote_from_bytes, urlsplit\nWHO = 'stand-in'\nPath = None\n"
    )
    lines = _run(
        """
        import sys
        import cfgopt  # the package calls import_pathlib first
        import pathlib, urllib.parse
        print(pathlib.WHO, pathlib.urlsplit is urllib.parse.urlsplit, sys.modules["urllib.parse"] is urllib.parse)
        """,
        path=str(tmp_path),
    )
    assert lines == ["stand-in True True"]


@pytest.mark.skipif(not EAGER_PATHLIB, reason="Python 3.13 and later import pathlib this way themselves")
def test_nothing_is_done_where_another_thread_runs() -> None:
    lines = _run(
        """
        import sys, threading
        stop = threading.Event()
        threading.Thread(target=stop.wait).start()
        import cfgopt
        import pathlib, urllib.parse
        print(pathlib.urlquote_from_bytes is urllib.parse.quote_from_bytes)
        stop.set()
        """
    )
    assert lines == ["True"]
