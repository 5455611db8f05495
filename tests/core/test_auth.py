"""Bearer tokens: missing, expired, forged, unknown member, suspended member."""

import jwt

from tests.support import Api

VIEWER = "{ viewer { username } }"
POST = 'mutation { createPost(input: {content: "hi"}) { id } }'


async def test_signed_out_viewer_is_null(api: Api) -> None:
    assert (await api.gql(VIEWER))["viewer"] is None


async def test_writing_without_a_token_is_unauthenticated(api: Api) -> None:
    assert await api.error_codes(POST) == ["UNAUTHENTICATED"]


async def test_an_expired_token_is_unauthenticated(api: Api) -> None:
    await api.member("maya")
    expired = api.token("maya", ttl=-10)
    assert await api.error_codes(VIEWER, token=expired) == ["UNAUTHENTICATED"]


async def test_a_token_valid_for_longer_than_the_lifetime_cap_is_unauthenticated(api: Api) -> None:
    """A leaked token with `exp` in the year 2286 was good for ever; JWT_MAX_LIFETIME_SECONDS caps it."""
    await api.member("maya")
    secret = api.settings.jwt_secret
    huge = jwt.encode({"sub": "maya", "exp": 9999999999}, secret, algorithm="HS256")
    body = await api.raw(VIEWER, token=huge)
    assert [e["extensions"]["code"] for e in body["errors"]] == ["UNAUTHENTICATED"]
    assert "lifetime" in body["errors"][0]["message"]
    cap = api.settings.jwt_max_lifetime_seconds
    assert await api.error_codes(VIEWER, token=api.token("maya", ttl=cap + 120)) == ["UNAUTHENTICATED"]
    assert (await api.gql(VIEWER, token=api.token("maya", ttl=cap - 120)))["viewer"] == {"username": "maya"}


async def test_a_forged_token_is_unauthenticated(api: Api) -> None:
    await api.member("maya")
    forged = jwt.encode(
        {"sub": "maya", "exp": 9999999999, "role": "admin"}, "not-the-secret-" + "x" * 32, algorithm="HS256"
    )
    assert await api.error_codes(VIEWER, token=forged) == ["UNAUTHENTICATED"]


async def test_a_token_without_a_profile_may_only_upsert_its_profile(api: Api) -> None:
    token = api.token("newcomer")
    assert await api.error_codes(POST, token=token) == ["FORBIDDEN"]
    await api.gql('mutation { upsertProfile(username: "newcomer", displayName: "New") { id } }', token=token)
    assert (await api.gql(VIEWER, token=token))["viewer"]["username"] == "newcomer"


async def test_a_suspended_members_token_is_refused(api: Api) -> None:
    maya = await api.member("maya")
    admin = await api.member("admin", admin=True)
    await api.gql('mutation { suspendMember(externalUserId: "maya") { status } }', token=admin)
    assert await api.error_codes(VIEWER, token=maya) == ["UNAUTHENTICATED"]


async def test_a_malformed_authorization_header_is_unauthenticated(api: Api) -> None:
    body = await api.raw(VIEWER, headers={"Authorization": "Basic Zm9vOmJhcg=="})
    assert [e["extensions"]["code"] for e in body["errors"]] == ["UNAUTHENTICATED"]
