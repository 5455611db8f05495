"""Fuzzing the GraphQL endpoint with schemathesis (GraphQL mode) against a real uvicorn on loopback.

Schemathesis reads the served schema and generates documents for every root
field, valid and invalid arguments alike. Whatever arrives, the API must
answer without a 500, without a stack trace and without SQL text: hostile
input gets a coded error, never a glimpse of the machinery. The budget is
bounded (FUZZ_EXAMPLES, default 200 in all) so the suite stays quick.
"""

from __future__ import annotations

import os
import re

import pytest
import requests
import schemathesis
from feedfabric.app import schema as served_schema
from feedfabric.core.auth import issue_token
from feedfabric.core.settings import Settings
from feedfabric.schema.core_schema import graphql_schema
from graphql import StringValueNode, introspection_from_schema
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.live_server import live_server

TOTAL_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "200"))
# Files travel as multipart parts, never inline: an inline value must be refused cleanly.
schemathesis.graphql.scalar("Upload", st.just(StringValueNode(value="not-a-file")))
FUZZ_SCHEMA = schemathesis.graphql.from_dict(introspection_from_schema(graphql_schema(served_schema)))
OPERATIONS = [result.ok() for result in FUZZ_SCHEMA.get_all_operations()]

# What must never reach a client: Python tracebacks and frames, SQL, driver and database names.
LEAKS = re.compile(
    r"Traceback \(most recent call last\)|File \"[^\"]+\.py\"|\bline \d+, in\b|"
    r"\bSELECT\b.+\bFROM\b|\bINSERT INTO\b|\bUPDATE\b.+\bSET\b|\bDELETE FROM\b|"
    r"asyncpg|psycopg|syntax error at or near|violates .* constraint|relation \"|"
    r"/site-packages/|feedfabric/[a-z_/]+\.py",
    re.IGNORECASE | re.DOTALL,
)


def check(response: requests.Response) -> None:
    text = response.text
    assert response.status_code < 500, (response.status_code, text[:500])
    leak = LEAKS.search(text)
    assert leak is None, (leak.group(0) if leak else "", text[:500])


@pytest.fixture(scope="module")
def per_operation() -> int:
    return max(TOTAL_EXAMPLES // max(len(OPERATIONS), 1), 2)


@pytest.mark.parametrize("mode", ["signed-out", "member"])
def test_fuzz_graphql(settings: Settings, per_operation: int, mode: str) -> None:
    # Limits stay on (they are part of what is fuzzed) except the per-minute budget, which would
    # otherwise turn most of the run into RATE_LIMITED answers.
    fuzz_settings = settings.model_copy(update={"rate_limit_operations": 1_000_000, "rate_limit_cost": 10**12})
    with live_server(fuzz_settings) as base, requests.Session() as session:
        headers: dict[str, str] = {}
        if mode == "member":
            token = issue_token(settings.jwt_secret, "fuzzer")
            headers["Authorization"] = f"Bearer {token}"
            created = session.post(
                f"{base}/graphql",
                headers=headers,
                json={"query": 'mutation { upsertProfile(username: "fuzzer", displayName: "Fuzz") { id } }'},
            )
            assert created.status_code == 200 and not created.json().get("errors"), created.text
        for operation in OPERATIONS:

            @given(case=operation.as_strategy())
            @hypothesis_settings(
                max_examples=per_operation,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def run(case: schemathesis.Case) -> None:
                check(case.call(base_url=f"{base}/graphql", session=session, headers=headers))

            run()


def test_leak_pattern_catches_what_it_should() -> None:
    assert LEAKS.search('Traceback (most recent call last):\n  File "/x/feedfabric/app.py", line 3, in f')
    assert LEAKS.search('duplicate key value violates unique constraint "posts_pkey"')
    assert LEAKS.search("SELECT id FROM posts WHERE 1")
    assert LEAKS.search("asyncpg.exceptions.UndefinedTableError")
    assert not LEAKS.search('{"errors":[{"message":"Post not found.","extensions":{"code":"NOT_FOUND"}}]}')
