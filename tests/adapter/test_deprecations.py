"""Deprecations in the framework the API is built on fail the tests (pyproject's filterwarnings), so a
release that deprecates something the adapter uses is seen when its bound is widened, not later."""

import warnings

import pytest

FRAMEWORK = ("strawberry.schema", "graphql.execution", "starlette.routing", "uvicorn.config", "websockets.server")


@pytest.mark.parametrize("module", [*FRAMEWORK, "feedfabric.adapter.graphql_http"])
def test_a_deprecation_raised_in_the_framework_or_our_calls_to_it_is_an_error(module: str) -> None:
    with pytest.raises(DeprecationWarning):
        warnings.warn_explicit("deprecated", DeprecationWarning, "x.py", 1, module=module)


def test_other_libraries_deprecations_stay_quiet() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.warn_explicit("deprecated", DeprecationWarning, "x.py", 1, module="httpx._client")
    assert caught == []
