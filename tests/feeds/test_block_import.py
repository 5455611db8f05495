"""importBlocks: a list of usernames or external IDs (Mastodon's blocked_accounts.csv as it is), blocked
in one transaction with every effect of `block`, and the lines that named nobody handed back."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
from feedfabric.feeds.block_import import MAX_LINES, UNKNOWN_SHOWN

from tests.support import Api

IMPORT = "mutation($f: Upload!) { importBlocks(file: $f) { blocked unknown } }"


async def upload(api: Api, token: str, data: bytes) -> dict[str, Any]:
    response = await api.client.post(
        "/graphql",
        headers={"Authorization": f"Bearer {token}"},
        data={
            "operations": json.dumps({"query": IMPORT, "variables": {"f": None}}),
            "map": json.dumps({"0": ["variables.f"]}),
        },
        files={"0": ("blocked_accounts.csv", data, "text/csv")},
    )
    return response.json()  # type: ignore[no-any-return]


async def blocked_by(pool: asyncpg.Pool, username: str) -> set[str]:
    rows = await pool.fetch(
        """SELECT t.username FROM blocks b JOIN members a ON a.id = b.blocker_id JOIN members t ON t.id = b.blocked_id
           WHERE a.username = $1""",
        username,
    )
    return {r["username"] for r in rows}


async def test_names_by_username_external_id_and_mastodon_address(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    for name in ("theo", "ivy", "zed", "kim"):
        await api.member(name)
    await pool.execute("UPDATE members SET external_id = 'auth0|ivy' WHERE username = 'ivy'")
    data = (
        b"theo\n"  # a username
        b"auth0|ivy\n"  # an external ID
        b"@ZED@mastodon.social\n"  # an account address, any case, a leading @
        b"\n"
        b"theo\n"  # twice: once
        b"maya\n"  # oneself: left out
        b"nobody@elsewhere.example\n"
        b"  ghost  \n"
    )
    body = await upload(api, maya, data)
    assert "errors" not in body, body
    assert body["data"]["importBlocks"] == {"blocked": 3, "unknown": ["nobody@elsewhere.example", "ghost"]}
    assert await blocked_by(pool, "maya") == {"theo", "ivy", "zed"}


async def test_mastodon_csv_with_a_header_and_a_bom(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    await api.member("theo")
    await api.member("ivy")
    data = "\ufeffAccount address,Hide notifications\ntheo@social.example,true\nivy,false\n".encode()
    body = await upload(api, maya, data)
    assert body["data"]["importBlocks"] == {"blocked": 2, "unknown": []}
    assert await blocked_by(pool, "maya") == {"theo", "ivy"}


async def test_every_effect_of_block_for_each_new_block(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    ivy = await api.member("ivy")
    await api.follow(maya, "theo")
    await api.follow(theo, "maya")
    await api.gql('mutation { addFavourite(externalUserId: "ivy") { id } }', token=maya)
    await api.gql('mutation { addFavourite(externalUserId: "maya") { id } }', token=ivy)
    post = await api.post(theo, "theo writes")
    await api.gql('mutation { block(externalUserId: "ivy") { id } }', token=maya)  # already blocked: counted
    before = await pool.fetchval("SELECT relations_version FROM members WHERE username = 'theo'")

    body = await upload(api, maya, b"theo\nivy\n")
    assert body["data"]["importBlocks"] == {"blocked": 2, "unknown": []}

    assert await pool.fetchval("SELECT count(*) FROM follows WHERE target_type = 'member'") == 0
    assert await pool.fetchval("SELECT count(*) FROM favourites") == 0
    assert await pool.fetchval("SELECT relations_version FROM members WHERE username = 'theo'") > before
    events = await pool.fetch(
        "SELECT event_type, key, payload, aggregate_version FROM outbox WHERE event_type IN "
        "('MemberBlocked', 'MemberUnfollowed') ORDER BY id"
    )
    maya_id = await pool.fetchval("SELECT id::text FROM members WHERE username = 'maya'")
    theo_id = await pool.fetchval("SELECT id::text FROM members WHERE username = 'theo'")
    blocked = [e for e in events if e["event_type"] == "MemberBlocked"]
    assert [e["payload"]["blockedId"] for e in blocked][-1] == theo_id  # ivy's came from `block`, once
    assert len(blocked) == 2
    unfollowed = {
        (e["payload"]["followerId"], e["payload"]["memberId"])
        for e in events[-3:]
        if e["event_type"] == "MemberUnfollowed"
    }
    assert unfollowed == {(maya_id, theo_id), (theo_id, maya_id)}
    # One key's versions go on without a gap or a repeat, in outbox order (the bulk write keeps add_event's rule).
    versions = [
        r["aggregate_version"]
        for r in await pool.fetch("SELECT aggregate_version FROM outbox WHERE key = $1 ORDER BY id", maya_id)
    ]
    assert versions == list(range(1, len(versions) + 1))
    # The visibility rule hides them from each other at once.
    assert (await api.gql("query($id: ID!) { post(id: $id) { id } }", {"id": post}, token=maya))["post"] is None


async def test_unknown_lines_are_the_first_hundred(api: Api) -> None:
    maya = await api.member("maya")
    data = "\n".join(f"nobody{n}" for n in range(UNKNOWN_SHOWN + 50)).encode()
    body = await upload(api, maya, data)
    assert body["data"]["importBlocks"]["blocked"] == 0
    assert body["data"]["importBlocks"]["unknown"] == [f"nobody{n}" for n in range(UNKNOWN_SHOWN)]


async def test_bad_files_are_bad_input_and_block_nobody(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    await api.member("theo")
    for data in (b"theo\n\xff\xfe\n", b"theo\x00\n", ("x\n" * (MAX_LINES + 1)).encode()):
        body = await upload(api, maya, data)
        assert [e["extensions"]["code"] for e in body["errors"]] == ["BAD_USER_INPUT"]
    assert await pool.fetchval("SELECT count(*) FROM blocks") == 0
    signed_out = await api.client.post(
        "/graphql",
        data={
            "operations": json.dumps({"query": IMPORT, "variables": {"f": None}}),
            "map": json.dumps({"0": ["variables.f"]}),
        },
        files={"0": ("b.csv", b"theo\n", "text/csv")},
    )
    assert [e["extensions"]["code"] for e in signed_out.json()["errors"]] == ["UNAUTHENTICATED"]


async def test_a_long_list_takes_the_same_path(api: Api, pool: asyncpg.Pool) -> None:
    """Past 2,000 lines the import's statements get more working memory; the answer is the same."""
    maya = await api.member("maya")
    await api.member("theo")
    data = ("theo\n" + "\n".join(f"nobody{n}" for n in range(2_500)) + "\nmaya\n").encode()
    body = await upload(api, maya, data)
    assert body["data"]["importBlocks"]["blocked"] == 1
    assert len(body["data"]["importBlocks"]["unknown"]) == UNKNOWN_SHOWN
    assert await blocked_by(pool, "maya") == {"theo"}
