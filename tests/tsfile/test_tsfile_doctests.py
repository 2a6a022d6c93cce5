"""The examples in the docstrings of bloomskip.tsfile run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

# reader, analysis and repair need a real file; their examples are marked +SKIP and the same
# calls are exercised by the other test modules.
MODULES = ["hash", "paths", "codec", "filter", "find", "cli"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(f"bloomskip.tsfile.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
