"""Every warning fails the test that raised it (pyproject's filterwarnings starts from "error"), so a
release that deprecates something we use, or a file or socket we leave open, is seen the day it appears;
only the exceptions listed there with their reasons stay quiet."""

import warnings

import pytest
from PIL import Image

MODULES = (
    "strawberry.schema",
    "graphql.execution",
    "starlette.routing",
    "uvicorn.config",
    "websockets.server",
    "httpx._client",
    "aiokafka.consumer",
    "feedfabric.adapter.graphql_http",
)


@pytest.mark.parametrize("module", MODULES)
def test_a_deprecation_raised_anywhere_is_an_error(module: str) -> None:
    with pytest.raises(DeprecationWarning):
        warnings.warn_explicit("deprecated", DeprecationWarning, "x.py", 1, module=module)


@pytest.mark.parametrize("category", [UserWarning, ResourceWarning, RuntimeWarning])
def test_other_warnings_are_errors_too(category: type[Warning]) -> None:
    with pytest.raises(category):
        warnings.warn("something to look at", category, stacklevel=1)


def test_a_listed_exception_stays_quiet() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.warn("Image size exceeds limit", Image.DecompressionBombWarning, stacklevel=1)
    assert caught == []
