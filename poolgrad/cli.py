"""The ``poolgrad`` command: the conformance suite against the installed frameworks, from any
directory. Every argument is pytest's or the plugin's (``poolgrad --help`` lists the plugin's
under "poolgrad"), e.g. ``poolgrad -n 2 --frameworks NAME --results r.jsonl --report-html r.html``.
"""

from __future__ import annotations

import sys

import pytest


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return int(pytest.main(["--pyargs", "poolgrad.conformance", "-p", "no:cacheprovider", *args]))


if __name__ == "__main__":
    raise SystemExit(main())
