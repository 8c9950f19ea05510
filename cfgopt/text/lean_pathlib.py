"""`import pathlib` without `urllib.parse`, as Python 3.13 imports it (python/cpython#112244, GH-77621).

Before 3.13, `pathlib` imports `urllib.parse` for one function that only `PurePath.as_uri()` calls, and
`urllib.parse` imports `ipaddress`: together about 2 ms of a seed lint's start-up (6% of `import yaml, json,
pathlib`; bench/results.md, "Start-up, fifth pass"), spent by every command line for a method cfgopt never calls.
`import_pathlib()` imports `pathlib` the way 3.13 does: while `pathlib` runs, `urllib.parse` is a stand-in holding
only that one function, which imports the real module when it is first called; the stand-in leaves
`sys.modules` as soon as `pathlib` is imported, so any later `import urllib.parse` (the server's `file://` URIs)
loads the real one. `Path.as_uri()` answers as before (tests/text/test_lean_pathlib.py).

Nothing is done where it cannot matter or could surprise: on Python 3.13 and later, in a process that has
imported either module already (cfgopt used as a library beside other code), and where another thread runs (it
could import `urllib.parse` while the stand-in is in place).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_PARSE = "urllib.parse"


def _quote_from_bytes(*args: Any, **kwargs: Any) -> str:
    """`urllib.parse.quote_from_bytes`, imported when first called (by `PurePath.as_uri()`)."""
    from urllib.parse import quote_from_bytes

    return quote_from_bytes(*args, **kwargs)


def import_pathlib() -> None:
    """Import `pathlib`, with `urllib.parse` left for `as_uri()` to import where the Python imports it eagerly."""
    if sys.version_info >= (3, 13) or "pathlib" in sys.modules or _PARSE in sys.modules:
        return
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return
    stand_in = type(sys)(_PARSE, "Only `quote_from_bytes`, for pathlib's import (cfgopt/text/lean_pathlib.py).")
    stand_in.quote_from_bytes = _quote_from_bytes  # type: ignore[attr-defined]
    sys.modules[_PARSE] = stand_in
    try:
        import pathlib  # the import this module is for
    except ImportError:  # a pathlib that asks for more than the one name: imported the ordinary way below
        pass
    finally:
        if sys.modules.get(_PARSE) is stand_in:
            del sys.modules[_PARSE]
    import pathlib  # noqa: F401  # already imported, unless the try above could not
