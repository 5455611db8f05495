"""/playground serves the web client; /dev/members and /dev/token exist only in dev mode."""

from __future__ import annotations

import httpx
import pytest
from feedfabric.app import create_app
from feedfabric.core.auth import TokenCache
from feedfabric.core.settings import Settings

from tests.support import Api, make_api


async def test_the_playground_and_its_modules_are_served(api: Api) -> None:
    index = await api.client.get("/playground/")
    assert index.status_code == 200 and "text/html" in index.headers["content-type"]
    assert '<script type="module" src="./app.js">' in index.text
    for path in ("app.js", "graphql.js", "transport-ws.js", "render.js", "style.css", "operations/HomeFeed.graphql"):
        assert (await api.client.get(f"/playground/{path}")).status_code == 200, path
    assert (await api.client.get("/playground")).status_code in (200, 307)


async def test_dev_routes_do_not_exist_outside_dev_mode(api: Api) -> None:
    await api.member("alice")
    assert (await api.client.get("/dev/members")).status_code == 404
    assert (await api.client.get("/dev/token", params={"externalId": "alice"})).status_code == 404


async def test_dev_routes_are_off_in_production_even_in_dev_mode(settings: Settings) -> None:
    app = create_app(settings.model_copy(update={"feedfabric_dev_mode": True, "feedfabric_production": True}))
    paths = {getattr(r, "path", None) for r in app.routes}
    assert "/dev/token" not in paths and "/dev/members" not in paths


DEV_SECRET = "the-dev-stacks-own"


async def test_dev_token_signs_in_as_an_existing_member(settings: Settings) -> None:
    dev = settings.model_copy(update={"feedfabric_dev_mode": True, "feedfabric_dev_secret": DEV_SECRET})
    async with make_api(dev) as api:
        api.client.base_url = httpx.URL("http://localhost:8000")
        await api.member("alice")
        await api.gql(
            'mutation { upsertProfile(username: "demo_admin", displayName: "Demo Admin") { id } }',
            token=api.token("demo-admin"),
        )
        members = (await api.client.get("/dev/members")).json()["members"]
        assert [m["externalId"] for m in members] == ["demo-admin", "alice"]  # demo members first

        body = (await api.client.get("/dev/token", params={"externalId": "alice"})).json()
        data = await api.gql("{ viewer { externalId } }", token=body["token"])
        assert data == {"viewer": {"externalId": "alice"}}
        assert TokenCache().decode(dev.jwt_secret, body["token"]).is_admin is False
        admin = await api.client.get(
            "/dev/token", params={"externalId": "demo-admin"}, headers={"X-Dev-Secret": DEV_SECRET}
        )
        assert TokenCache().decode(dev.jwt_secret, admin.json()["token"]).is_admin is True

        missing = await api.client.get("/dev/token", params={"externalId": "nobody"})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "member.not_found"


@pytest.mark.parametrize(
    ("host", "client", "answered"),
    [
        ("localhost:8000", "127.0.0.1", True),
        ("127.0.0.1:8000", "127.0.0.1", True),
        ("[::1]:8000", "::1", True),
        ("attacker.example:8000", "127.0.0.1", False),  # DNS rebinding: a page elsewhere, the browser on loopback
        ("192.168.1.20:8000", "127.0.0.1", False),
        ("localhost:8000", "192.168.1.7", False),  # another machine through a forwarded port
    ],
)
async def test_dev_sign_in_answers_only_loopback_hosts(
    settings: Settings, host: str, client: str, answered: bool
) -> None:
    dev = settings.model_copy(update={"feedfabric_dev_mode": True})
    app = create_app(dev)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=(client, 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            api = Api(http, dev)
            await api.member("alice")
            for path in ("/dev/token?externalId=alice", "/dev/members"):
                response = await http.get(path, headers={"host": host})
                assert (response.status_code == 200) is answered, (path, response.text)
                if not answered:
                    assert response.status_code == 403 and response.json()["error"]["code"] == "auth.forbidden"


@pytest.mark.parametrize(("configured", "sent"), [(DEV_SECRET, None), (DEV_SECRET, "guessed"), ("", ""), ("", None)])
async def test_the_admins_dev_token_needs_the_dev_stacks_secret(
    settings: Settings, configured: str, sent: str | None
) -> None:
    dev = settings.model_copy(update={"feedfabric_dev_mode": True, "feedfabric_dev_secret": configured})
    async with make_api(dev) as api:
        api.client.base_url = httpx.URL("http://localhost:8000")
        await api.gql(
            'mutation { upsertProfile(username: "demo_admin", displayName: "Demo Admin") { id } }',
            token=api.token("demo-admin"),
        )
        headers = {"X-Dev-Secret": sent} if sent is not None else {}
        refused = await api.client.get("/dev/token", params={"externalId": "demo-admin"}, headers=headers)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "auth.forbidden"
        assert "token" not in refused.json()


@pytest.mark.parametrize("origins", ["*", "https://app.example"])
async def test_dev_sign_in_never_answers_another_origin(settings: Settings, origins: str) -> None:
    dev = settings.model_copy(
        update={"feedfabric_dev_mode": True, "feedfabric_dev_secret": DEV_SECRET, "cors_allowed_origins": origins}
    )
    async with make_api(dev) as api:
        api.client.base_url = httpx.URL("http://localhost:8000")
        await api.member("alice")
        origin = {"Origin": "https://app.example"}
        for path in ("/dev/token?externalId=alice", "/dev/members"):
            answer = await api.client.get(path, headers=origin)
            assert answer.status_code == 200 and "access-control-allow-origin" not in answer.headers, path
            preflight = await api.client.options(
                path,
                headers={
                    **origin,
                    "Access-Control-Request-Method": "GET",
                    "Access-Control-Request-Headers": "x-dev-secret",
                },
            )
            assert not any(h.startswith("access-control-") for h in preflight.headers), path
        graphql = await api.client.post("/graphql", json={"query": "{ __typename }"}, headers=origin)
        assert "access-control-allow-origin" in graphql.headers  # the API itself still answers the origin
