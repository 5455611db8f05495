"""worker-media with images made here: metadata stripped, orientation applied, hostile files rejected."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from feedfabric.core.errors import BadInput
from feedfabric.db import media as media_db
from feedfabric.db import post_extras
from feedfabric.feeds import media as uploads
from feedfabric.feeds import photos as media
from feedfabric.workers import media as worker
from feedfabric.workers.base import WorkerContext
from PIL import Image, ImageCms, ImageDraw

from tests import db_reads
from tests import factories_ml as f

GPS_IFD = 0x8825
ORIENTATION = 0x0112


def photo(size=(640, 480), fmt="JPEG", mode="RGB", **save) -> bytes:
    image = Image.new(mode, size, (90, 120, 160) if mode == "RGB" else (90, 120, 160, 128))
    draw = ImageDraw.Draw(image)
    for x in range(0, size[0], 16):
        draw.line([(x, 0), (size[0] - x, size[1])], fill=(x % 256, 60, 200), width=3)
    out = io.BytesIO()
    image.save(out, fmt, **save)
    return out.getvalue()


def jpeg_with_gps() -> bytes:
    exif = Image.Exif()
    exif[0x010F] = "SpyCam"
    gps = exif.get_ifd(GPS_IFD)
    gps[1], gps[2], gps[3], gps[4] = "N", (51.0, 30.0, 12.5), "W", (0.0, 7.0, 39.0)
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    return photo(exif=exif, icc_profile=icc, comment=b"secret-comment")


def png_bytes(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def forged_png(width: int, height: int) -> bytes:
    """A tiny real PNG whose header claims width × height pixels."""
    data = bytearray(png_bytes(Image.new("L", (8, 8))))
    ihdr = struct.pack(">II", width, height) + bytes(data[24:29])
    data[16:29] = ihdr
    data[29:33] = struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return bytes(data)


@pytest.fixture
def ctx(settings, pool, redis) -> WorkerContext:
    return WorkerContext(settings=settings, pool=pool, redis=redis)


async def upload_and_process(ctx, owner, data: bytes):
    media_id = await uploads.store_upload(ctx.pool, ctx.settings, owner, data)
    event = f.event("MediaUploaded", owner, {"mediaId": media_id, "ownerId": owner})
    assert await f.deliver(ctx, worker.GROUP, [event]) == 1
    async with ctx.pool.acquire() as conn:
        return await media_db.get_one(conn, media_id), event


# -- the pure pipeline --------------------------------------------------------


def test_sniffing_ignores_names_and_declared_types():
    assert media.sniff(photo()) == "jpeg"
    assert media.sniff(photo(fmt="PNG")) == "png"
    assert media.sniff(photo(fmt="GIF")) == "gif"
    assert media.sniff(photo(fmt="WEBP")) == "webp"
    assert media.sniff(b"<!doctype html><html><script>alert(1)</script>") is None
    assert media.sniff(b"%PDF-1.7") is None
    assert media.sniff(b"BM" + b"\0" * 64) is None  # BMP decodes in Pillow but is not accepted


def test_gps_exif_icc_and_comments_are_stripped():
    original = jpeg_with_gps()
    with Image.open(io.BytesIO(original)) as source:
        assert source.getexif().get_ifd(GPS_IFD)
    result = media.process_image(original)
    assert isinstance(result, media.Processed)
    with Image.open(io.BytesIO(result.data)) as rebuilt:
        assert rebuilt.format == "JPEG"
        assert not rebuilt.getexif()
        assert not rebuilt.getexif().get_ifd(GPS_IFD)
        assert "exif" not in rebuilt.info and "icc_profile" not in rebuilt.info
        assert "comment" not in rebuilt.info
    assert b"secret-comment" not in result.data and b"SpyCam" not in result.data


def test_orientation_is_applied_and_then_dropped():
    image = Image.new("RGB", (400, 200), "blue")
    image.paste(Image.new("RGB", (200, 200), "red"), (0, 0))
    exif = Image.Exif()
    exif[ORIENTATION] = 6  # stored sideways: shown rotated 90° clockwise
    out = io.BytesIO()
    image.save(out, "JPEG", exif=exif)
    result = media.process_image(out.getvalue())
    assert isinstance(result, media.Processed)
    assert (result.width, result.height) == (200, 400)
    with Image.open(io.BytesIO(result.data)) as rebuilt:
        assert ORIENTATION not in rebuilt.getexif()
        top, bottom = rebuilt.getpixel((100, 50)), rebuilt.getpixel((100, 350))
    assert top[0] > 200 and top[2] < 60  # the red half is now on top
    assert bottom[2] > 200 and bottom[0] < 60


def test_longest_side_is_capped_and_transparency_kept():
    result = media.process_image(photo(size=(3000, 1000)), media.Limits(max_side=1200))
    assert isinstance(result, media.Processed) and (result.width, result.height) == (1200, 400)
    clear = media.process_image(photo(fmt="PNG", mode="RGBA"))
    assert isinstance(clear, media.Processed) and clear.content_type == "image/png"
    for fmt in ("GIF", "WEBP"):
        assert isinstance(media.process_image(photo(fmt=fmt)), media.Processed)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "empty"),
        (b"<html><body onload=alert(1)>not a photo</body></html>", "unsupported_type"),
        (png_bytes(Image.new("1", (12_000, 12_000))), "decompression_bomb"),
        (forged_png(100_000, 100_000), "decompression_bomb"),
        (png_bytes(Image.effect_noise((300, 300), 60))[:4000], "truncated"),
        (photo()[:2000], "truncated"),
        (b"\x89PNG\r\n\x1a\n" + b"garbage" * 20, "corrupt"),
    ],
    ids=["empty", "html-named-jpg", "bomb", "forged-header", "truncated-png", "truncated-jpeg", "corrupt"],
)
def test_hostile_files_are_rejected_with_reasons(data, reason):
    result = media.process_image(data)
    assert isinstance(result, media.Rejected)
    assert result.reason == reason, result


def test_limits_on_bytes_and_pixels():
    big = photo(size=(1200, 1200))
    assert media.process_image(big, media.Limits(max_bytes=len(big) - 1)).reason == "too_large"
    assert media.process_image(big, media.Limits(max_pixels=1000 * 1000)).reason == "too_many_pixels"


def test_score_prefers_sharp_well_exposed_photos():
    sharp = media.process_image(photo())
    flat = media.process_image(png_bytes(Image.new("RGB", (640, 480), (128, 128, 128))))
    dark = media.process_image(png_bytes(Image.new("RGB", (640, 480), (2, 2, 2))))
    assert 0 <= dark.score < flat.score < sharp.score <= 1


# -- upload, worker, serving --------------------------------------------------


async def test_upload_to_ready_and_served_without_gps(ctx, pool, settings):
    owner = await f.member(pool)
    row, event = await upload_and_process(ctx, owner, jpeg_with_gps())
    assert row["status"] == "ready" and row["content_type"] == "image/jpeg"
    assert (row["width"], row["height"]) == (640, 480) and 0 <= row["score"] <= 1

    path = uploads.processed_path(settings, row)
    assert path is not None and path.parent == settings.feedfabric_data_dir / "media"
    with Image.open(path) as served:
        assert not served.getexif().get_ifd(GPS_IFD)
    assert (
        await pool.fetchval("SELECT count(*) FROM outbox WHERE event_type = 'MediaUploaded' AND key = $1", str(owner))
        == 1
    )
    # Redelivery (a new delivery of a decided row) changes nothing.
    again = f.event("MediaUploaded", owner, {"mediaId": row["id"], "ownerId": owner})
    await f.deliver(ctx, worker.GROUP, [event, again])
    async with pool.acquire() as conn:
        assert (await media_db.get_one(conn, row["id"]))["updated_at"] == row["updated_at"]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"<html><script>document.cookie</script></html>", "unsupported_type"),  # uploaded as evil.jpg
        (png_bytes(Image.new("1", (12_000, 12_000))), "decompression_bomb"),
        (png_bytes(Image.effect_noise((300, 300), 60))[:4000], "truncated"),
    ],
    ids=["html", "bomb", "truncated-png"],
)
async def test_rejected_uploads_are_never_servable(ctx, pool, settings, data, reason):
    owner = await f.member(pool)
    row, _ = await upload_and_process(ctx, owner, data)
    assert (row["status"], row["reason"]) == ("rejected", reason)
    assert uploads.processed_path(settings, row) is None
    media_dir = settings.feedfabric_data_dir / "media"
    assert not list(media_dir.glob(f"{row['id']}*"))
    assert not media.original_path(settings.feedfabric_data_dir, row["id"]).exists()
    async with pool.acquire() as conn:
        assert await db_reads.owned_ready_media(conn, owner, [row["id"]]) == set()


async def test_over_size_upload_is_refused_at_the_edge(ctx, pool, settings):
    owner = await f.member(pool)
    small = settings.model_copy(update={"media_max_bytes": 2048})
    with pytest.raises(BadInput):
        await uploads.store_upload(pool, small, owner, b"\xff\xd8\xff" + b"\0" * 4096)
    with pytest.raises(BadInput):
        await uploads.store_upload(pool, settings, owner, b"")
    assert await pool.fetchval("SELECT count(*) FROM media") == 0
    assert not (settings.feedfabric_data_dir / "media" / "original").exists() or not list(
        (settings.feedfabric_data_dir / "media" / "original").iterdir()
    )


async def test_posts_list_only_ready_media_in_order_and_only_the_owners(ctx, pool):
    owner, other = await f.member(pool), await f.member(pool)
    post = await f.post(pool, owner, "two photos")
    first, _ = await upload_and_process(ctx, owner, photo())
    bad, _ = await upload_and_process(ctx, owner, b"GIF89a-not-really")
    second, _ = await upload_and_process(ctx, owner, photo(fmt="PNG"))
    pending = await uploads.store_upload(pool, ctx.settings, owner, photo())
    for position, media_id in enumerate([second["id"], bad["id"], pending, first["id"]]):
        await pool.execute(
            "INSERT INTO post_media (post_id, media_id, position) VALUES ($1, $2, $3)", post, media_id, position
        )
    async with pool.acquire() as conn:
        listed = (await post_extras.page_extras(conn, [post], None)).extras[post].media
        assert [m["id"] for m in listed] == [second["id"], first["id"]]
        everything = [first["id"], bad["id"], second["id"], pending]
        assert await db_reads.owned_ready_media(conn, owner, everything) == {first["id"], second["id"]}
        assert await db_reads.owned_ready_media(conn, other, everything) == set()
        assert set(await media_db.get_media(conn, everything)) == set(everything)
