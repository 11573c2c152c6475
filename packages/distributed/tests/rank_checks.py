"""A tiny check runner for rank scripts: ``@check("name")`` runs a function now and records its outcome.

Each rank writes ``checks<rank>.json`` (``{name: "ok" | traceback}``) into the output folder, so
that a test on the pytest side can report every check separately. A failed check does not stop
the script (every rank runs the same checks, so their collectives stay in step).
"""

from __future__ import annotations

import json
import os
import pathlib
import traceback

RESULTS: dict[str, str] = {}


def check(name: str):
    def run(fn):
        try:
            fn()
            RESULTS[name] = "ok"
        except Exception:  # noqa: BLE001 - recorded for the test to report
            RESULTS[name] = traceback.format_exc()
        return fn
    return run


def write(folder: str, rank: int) -> None:
    path = pathlib.Path(folder) / f"checks{rank}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(RESULTS, indent=1))
    os.replace(tmp, path)


def raises(kind, *fragments):
    """A context manager asserting that ``kind`` is raised with every fragment in its message."""
    class Raises:
        def __enter__(self):
            return self

        def __exit__(self, exc_type, exc, tb):
            if exc_type is None:
                raise AssertionError(f"expected {kind.__name__}, nothing was raised")
            if not issubclass(exc_type, kind):
                return False
            missing = [f for f in fragments if f not in str(exc)]
            if missing:
                raise AssertionError(f"{kind.__name__} message {str(exc)!r} lacks {missing}")
            return True
    return Raises()
