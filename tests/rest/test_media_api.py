"""Photos through the API: GraphQL multipart and REST upload, READY-only serving, attaching to posts."""

import io
import json
import uuid

import asyncpg
from feedfabric.db.pool import transaction
from feedfabric.feeds import media as media_svc
from PIL import Image

from tests.support import Api

UPLOAD = "mutation($file: Upload!) { uploadMedia(file: $file) { id status url } }"


def jpeg(size: tuple[int, int] = (64, 48)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (200, 80, 40)).save(out, "JPEG")
    return out.getvalue()


async def upload_gql(api: Api, token: str, data: bytes, name: str = "photo.jpg") -> dict:
    response = await api.client.post(
        "/graphql",
        headers={"Authorization": f"Bearer {token}"},
        data={
            "operations": json.dumps({"query": UPLOAD, "variables": {"file": None}}),
            "map": json.dumps({"0": ["variables.file"]}),
        },
        files={"0": (name, data, "image/jpeg")},
    )
    body = response.json()
    assert "errors" not in body, body
    return body["data"]["uploadMedia"]


async def process(api: Api, pool: asyncpg.Pool, media_id: str) -> str:
    """What worker-media does for the MediaUploaded event."""
    async with transaction(pool) as conn:
        return await media_svc.process_pending(conn, api.settings, uuid.UUID(media_id))


async def test_an_uploaded_photo_is_pending_then_ready_and_served(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    uploaded = await upload_gql(api, maya, jpeg())
    assert uploaded["status"] == "PENDING" and uploaded["url"] is None
    assert (await api.client.get(f"/media/{uploaded['id']}")).status_code == 404
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE event_type = 'MediaUploaded'") == 1
    assert await process(api, pool, uploaded["id"]) == "ready"
    post = await api.gql(
        'mutation($m: [ID!]) { createPost(input: {content: "look", mediaIds: $m}) { media { id status url contentType width } } }',
        {"m": [uploaded["id"]]},
        token=maya,
    )
    [media] = post["createPost"]["media"]
    assert media["status"] == "READY" and media["contentType"] == "image/jpeg" and media["width"] == 64
    served = await api.client.get(media["url"])
    assert served.status_code == 200 and served.headers["content-type"] == "image/jpeg"
    assert served.content[:3] == b"\xff\xd8\xff"
    # Revalidating with the ETag it holds, a client gets 304 and no body; with another, the file.
    again = await api.client.get(media["url"], headers={"If-None-Match": served.headers["etag"]})
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", served.headers["etag"])
    stale = await api.client.get(media["url"], headers={"If-None-Match": '"other"'})
    assert stale.status_code == 200 and stale.content == served.content


async def test_an_html_file_named_jpg_is_rejected_and_never_served(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    uploaded = await upload_gql(api, maya, b"<html><script>alert(1)</script></html>", name="cat.jpg")
    assert await process(api, pool, uploaded["id"]) == "rejected"
    status = await api.gql(
        "query($id: ID!) { media(id: $id) { status rejectReason url } }", {"id": uploaded["id"]}, token=maya
    )
    assert status["media"]["status"] == "REJECTED" and status["media"]["rejectReason"]
    assert status["media"]["url"] is None
    assert (await api.client.get(f"/media/{uploaded['id']}")).status_code == 404


async def test_a_post_may_attach_only_the_viewers_own_ready_media(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    theo = await api.member("theo")
    theirs = await upload_gql(api, theo, jpeg())
    await process(api, pool, theirs["id"])
    pending = await upload_gql(api, maya, jpeg())
    create = 'mutation($m: [ID!]) { createPost(input: {content: "x", mediaIds: $m}) { id } }'
    for media_id in (theirs["id"], pending["id"], str(uuid.uuid4())):
        assert await api.error_codes(create, {"m": [media_id]}, token=maya) == ["BAD_USER_INPUT"]
    assert await pool.fetchval("SELECT count(*) FROM posts") == 0


async def test_rest_upload_and_status(api: Api, pool: asyncpg.Pool) -> None:
    maya = await api.member("maya")
    response = await api.rest("POST", "/media", token=maya, files={"file": ("p.jpg", jpeg(), "image/jpeg")})
    assert response.status_code == 200
    media_id = response.json()["media"]["id"]
    await process(api, pool, media_id)
    status = (await api.rest("GET", f"/media/{media_id}/status", token=maya)).json()["media"]
    assert status["status"] == "READY" and status["url"] == f"/media/{media_id}"
    assert (await api.rest("POST", "/media", token=maya, content=b"")).status_code == 400
    assert (await api.rest("POST", "/media", content=jpeg())).status_code == 401


async def test_an_upload_over_the_limit_is_refused(api: Api) -> None:
    maya = await api.member("maya")
    too_big = b"\xff\xd8\xff" + b"0" * (api.settings.media_max_bytes + 1)
    response = await api.rest("POST", "/media", token=maya, content=too_big)
    assert response.status_code in (400, 413)
