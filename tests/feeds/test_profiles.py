"""upsertProfile: create, update, validation."""

from tests.support import Api

UPSERT = "mutation($u: String!, $d: String!, $a: String) { upsertProfile(username: $u, displayName: $d, avatarUrl: $a) { externalId username displayName avatarUrl status } }"


async def test_upsert_creates_then_updates_the_tokens_member(api: Api) -> None:
    token = api.token("ext-1")
    created = await api.gql(UPSERT, {"u": "maya_runs", "d": "Maya"}, token=token)
    assert created["upsertProfile"] == {
        "externalId": "ext-1",
        "username": "maya_runs",
        "displayName": "Maya",
        "avatarUrl": None,
        "status": "ACTIVE",
    }
    updated = await api.gql(UPSERT, {"u": "maya", "d": "Maya R", "a": "https://example.org/m.png"}, token=token)
    assert updated["upsertProfile"]["username"] == "maya"
    assert updated["upsertProfile"]["avatarUrl"] == "https://example.org/m.png"


async def test_a_taken_username_is_bad_input(api: Api) -> None:
    await api.member("maya")
    codes = await api.error_codes(UPSERT, {"u": "MAYA", "d": "Other"}, token=api.token("other"))
    assert codes == ["BAD_USER_INPUT"]


async def test_invalid_profile_fields_are_bad_input(api: Api) -> None:
    token = api.token("ext")
    for variables in (
        {"u": "has space", "d": "x"},
        {"u": "ok", "d": ""},
        {"u": "ok", "d": "nul\x00byte"},
        {"u": "ok", "d": "x", "a": "javascript:alert(1)"},
    ):
        assert await api.error_codes(UPSERT, variables, token=token) == ["BAD_USER_INPUT"]
    assert (await api.gql('{ member(externalId: "ext") { id } }'))["member"] is None
