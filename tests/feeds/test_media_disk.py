"""Media disk and memory are bounded: originals go once processed, each member has a quota, and one
image's decode fits a stated budget of the worker's memory."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import asyncpg
import pytest
from feedfabric.core.errors import QuotaExceeded
from feedfabric.core.settings import Settings
from feedfabric.db import media as media_db
from feedfabric.db.pool import transaction
from feedfabric.feeds import media as uploads
from feedfabric.feeds import photos as media
from PIL import Image

from tests import factories_ml as f
from tests.rest.test_media_api import UPLOAD, upload_gql
from tests.support import Api


def jpeg(size: tuple[int, int] = (640, 480), mode: str = "RGB") -> bytes:
    out = io.BytesIO()
    Image.effect_noise(size, 40).convert(mode).save(out, "JPEG", quality=90)
    return out.getvalue()


async def process(pool: asyncpg.Pool, settings: Settings, media_id: uuid.UUID) -> str:
    async with transaction(pool) as conn:
        return await uploads.process_pending(conn, settings, media_id)


# -- originals ------------------------------------------------------------------


async def test_the_original_is_deleted_once_the_rebuilt_copy_is_ready(pool: asyncpg.Pool, settings: Settings) -> None:
    owner = await f.member(pool)
    media_id = await uploads.store_upload(pool, settings, owner, jpeg())
    original = media.original_path(settings.feedfabric_data_dir, media_id)
    assert original.is_file()
    assert await process(pool, settings, media_id) == "ready"
    assert not original.exists()
    async with pool.acquire() as conn:
        assert uploads.processed_path(settings, await media_db.get_one(conn, media_id)) is not None


async def test_a_failed_transaction_after_the_original_went_is_rebuilt_from_the_copy(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    owner = await f.member(pool)
    media_id = await uploads.store_upload(pool, settings, owner, jpeg())
    with pytest.raises(RuntimeError):
        async with transaction(pool) as conn:
            assert await uploads.process_pending(conn, settings, media_id) == "ready"
            raise RuntimeError("the commit failed")
    assert not media.original_path(settings.feedfabric_data_dir, media_id).exists()
    assert await process(pool, settings, media_id) == "ready"  # the redelivery


# -- quota ----------------------------------------------------------------------


async def test_usage_counts_pending_originals_then_rebuilt_files_and_never_rejections(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    owner = await f.member(pool)
    data = jpeg((1200, 900))
    media_id = await uploads.store_upload(pool, settings, owner, data)
    assert await media_db.usage(pool, owner) == len(data)
    await process(pool, settings, media_id)
    async with pool.acquire() as conn:
        row = await media_db.get_one(conn, media_id)
    assert row is not None
    assert await media_db.usage(pool, owner) == row["byte_size"] != len(data)
    bad = await uploads.store_upload(pool, settings, owner, b"<html>not a photo</html>")
    await process(pool, settings, bad)
    assert await media_db.usage(pool, owner) == row["byte_size"]


async def test_an_upload_past_the_quota_is_refused_and_writes_nothing(pool: asyncpg.Pool, settings: Settings) -> None:
    owner = await f.member(pool)
    data = jpeg()
    tight = settings.model_copy(update={"media_quota_bytes": len(data) + 10})
    await uploads.store_upload(pool, tight, owner, data)
    originals = media.original_path(settings.feedfabric_data_dir, uuid.uuid4()).parent
    before = sorted(originals.iterdir())
    with pytest.raises(QuotaExceeded):
        await uploads.store_upload(pool, tight, owner, data)
    assert sorted(originals.iterdir()) == before
    assert await pool.fetchval("SELECT count(*) FROM media WHERE owner_id = $1", owner) == 1
    other = await f.member(pool)  # the quota is per member
    await uploads.store_upload(pool, tight, other, data)


async def test_two_uploads_at_once_cannot_both_pass_the_quota(pool: asyncpg.Pool, settings: Settings) -> None:
    owner = await f.member(pool)
    data = jpeg()
    tight = settings.model_copy(update={"media_quota_bytes": len(data) * 3 // 2})
    results = await asyncio.gather(
        *(uploads.store_upload(pool, tight, owner, data) for _ in range(4)), return_exceptions=True
    )
    assert sum(isinstance(r, uuid.UUID) for r in results) == 1
    assert sum(isinstance(r, QuotaExceeded) for r in results) == 3
    assert await media_db.usage(pool, owner) == len(data)


async def test_quota_exceeded_is_coded_over_graphql_and_rest(settings: Settings) -> None:
    from tests.schema.test_limits import api_with

    data = jpeg()
    async with api_with(settings, media_quota_bytes=len(data) + 10) as api:
        maya = await api.member("maya")
        await upload_gql(api, maya, data)
        refused = await api.client.post(
            "/graphql",
            headers={"Authorization": f"Bearer {maya}"},
            data={
                "operations": json.dumps({"query": UPLOAD, "variables": {"file": None}}),
                "map": json.dumps({"0": ["variables.file"]}),
            },
            files={"0": ("p.jpg", data, "image/jpeg")},
        )
        assert [e["extensions"]["code"] for e in refused.json()["errors"]] == ["QUOTA_EXCEEDED"]
        response = await api.rest("POST", "/media", token=maya, content=data)
        assert response.status_code == 409
        assert response.json()["error"]["code"] == "media.quota_exceeded"


async def test_rest_upload_is_capped_by_media_max_bytes_not_the_body_limit(api: Api) -> None:
    maya = await api.member("maya")
    big = jpeg((2400, 1800))
    assert api.settings.max_body_bytes < len(big) < api.settings.media_max_bytes
    response = await api.client.post(
        "/media", content=big, headers={"Authorization": f"Bearer {maya}", "content-type": "image/jpeg"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["media"]["status"] == "PENDING"


# -- decode budget --------------------------------------------------------------

_MEASURE = """
import resource, sys
from pathlib import Path
from feedfabric.feeds import photos as media
data = Path(sys.argv[1]).read_bytes()
limits = media.Limits(decode_bytes=int(sys.argv[2]))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = media.process_image(data, limits)
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
print(getattr(result, "reason", "ready"), grown)
"""

_MAKE_PNG = """
import sys
from PIL import Image
Image.new(sys.argv[2], (int(sys.argv[3]), int(sys.argv[4])), 90).save(sys.argv[1], "PNG")
"""


def _png(path: Path, mode: str, width: int, height: int) -> Path:
    subprocess.run([sys.executable, "-c", _MAKE_PNG, str(path), mode, str(width), str(height)], check=True)
    return path


def _measure(path: Path, budget: int) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), str(budget)], check=True, capture_output=True, text=True
    )
    reason, grown = out.stdout.split()
    return reason, int(grown)


def test_a_small_png_of_many_pixels_is_refused_before_decoding(tmp_path: Path) -> None:
    path = _png(tmp_path / "wide.png", "RGB", 7000, 7000)  # 49 MP, within max_pixels, a few hundred kB
    assert path.stat().st_size < 1_000_000
    reason, grown = _measure(path, media.Limits().decode_bytes)
    assert reason == "too_many_pixels"
    assert grown < 30_000_000, f"the worker grew by {grown} bytes"


def test_an_image_within_the_budget_stays_within_it(tmp_path: Path) -> None:
    path = _png(tmp_path / "fits.png", "RGB", 3000, 2500)
    budget = media.decode_bytes((3000, 2500), "RGB")
    reason, grown = _measure(path, budget)
    assert reason == "ready"
    assert grown <= budget * 1.1, f"the worker grew by {grown} bytes for a budget of {budget}"
    assert _measure(path, budget - 1)[0] == "too_many_pixels"


def test_a_large_jpeg_decodes_at_a_reduced_scale_within_the_budget() -> None:
    out = io.BytesIO()
    Image.new("L", (8000, 6000), 90).save(out, "JPEG")
    big = out.getvalue()  # 48 MP: fully decoded it alone would be 48 MB, plus its copy
    result = media.process_image(big, media.Limits(decode_bytes=70_000_000))
    assert isinstance(result, media.Processed) and max(result.width, result.height) == 2048


async def test_the_sweep_deletes_originals_of_decided_uploads_and_old_orphans(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    owner = await f.member(pool)
    pending = await uploads.store_upload(pool, settings, owner, jpeg())
    decided = await uploads.store_upload(pool, settings, owner, jpeg())
    async with transaction(pool) as conn:  # decided by a version that kept its original
        await media_db.mark_rejected(conn, decided, "corrupt")
    folder = media.original_path(settings.feedfabric_data_dir, pending).parent
    young_orphan, old_orphan = folder / str(uuid.uuid4()), folder / str(uuid.uuid4())
    young_orphan.write_bytes(b"in flight")
    old_orphan.write_bytes(b"failed long ago")
    os.utime(old_orphan, (time.time() - 7200, time.time() - 7200))
    async with pool.acquire() as conn:
        assert await uploads.sweep_originals(conn, settings) == 2
    assert sorted(p.name for p in folder.iterdir()) == sorted([str(pending), young_orphan.name])
