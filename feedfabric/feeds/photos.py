"""Uploaded images made safe to serve: scan, sniff, rebuild and score, from bytes to bytes.

Nothing here touches the network or the database; the only file access is the
path helpers at the bottom. The steps, in order, each a reason to reject:

- scan: empty, over `max_bytes` (`too_large`), more than `max_pixels` pixels
  in the header (`too_many_pixels`; called `decompression_bomb` when a small
  file claims them, over 100 pixels per byte, or when Pillow's own
  DecompressionBombError fires), more memory to decode and rebuild than
  `decode_bytes` (`too_many_pixels`, see below), and a decode that runs out
  of data (`truncated`) or fails otherwise (`corrupt`).
- decode budget: the worker's memory for one image is bounded before any
  pixel is decoded. A JPEG is first set to decode at a reduced scale (draft
  mode); then the pixels still to decode, times the bytes Pillow keeps per
  pixel in the decoded mode (1 for L, P and 1-bit, else up to 4) plus 4 for
  the rebuilt RGB(A) copy, must fit in `decode_bytes` (default 200 MB: a PNG
  of about 25 megapixels in colour, 40 in grey or palette; any JPEG within
  `max_pixels`, since draft mode decodes it near the output size).
- sniff: the real type from magic bytes, JPEG, PNG, WebP or GIF only
  (`unsupported_type`); the declared type and file name never count. Pillow
  is then told to use only that decoder.
- rebuild: EXIF orientation applied, first frame only (animations become
  stills), longest side capped at `max_side` (bicubic, antialiased; the
  resize runs before the rotation so the rotation is cheap), re-encoded from
  pixels with all metadata dropped (EXIF with GPS, ICC, XMP, comments): JPEG
  quality 85, or PNG when the image has transparency. A JPEG much larger
  than the cap is decoded at 1/2, 1/4 or 1/8 scale (libjpeg draft mode).
- score: 0..1, 0.6 × sharpness + 0.4 × exposure, on a grey copy at most 512
  px wide. Sharpness is v / (v + 150) for v the variance of the 4-neighbour
  Laplacian (a blurred photo scores near 0, a crisp one near 1). Exposure is
  1 − |mean − 128| / 128 scaled down by the share of pixels clipped to
  black (< 5) or white (> 250).
"""

from __future__ import annotations

import io
import math
import uuid
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageFilter, ImageStat

__all__ = ["Limits", "Processed", "Rejected", "decode_bytes", "original_path", "process_image", "sniff"]

JPEG_QUALITY = 85
BOMB_PIXELS_PER_BYTE = 100
ORIENTATION_TAG = 0x0112
_SCORE_SIDE = 512
_PIL_FORMAT = {"jpeg": "JPEG", "png": "PNG", "webp": "WEBP", "gif": "GIF"}
CONTENT_TYPES = {"jpg": "image/jpeg", "png": "image/png"}
EXTENSIONS = {v: k for k, v in CONTENT_TYPES.items()}


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 20_000_000
    max_pixels: int = 50_000_000
    max_side: int = 2048
    decode_bytes: int = 200_000_000


@dataclass(frozen=True)
class Processed:
    data: bytes
    content_type: str
    ext: str
    width: int
    height: int
    score: float
    source_type: str


@dataclass(frozen=True)
class Rejected:
    reason: str
    detail: str


def sniff(data: bytes) -> str | None:
    """The image type the bytes really are, or None for anything but the four we accept."""
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def process_image(data: bytes, limits: Limits = Limits()) -> Processed | Rejected:
    if not data:
        return Rejected("empty", "the file is empty")
    if len(data) > limits.max_bytes:
        return Rejected("too_large", f"{len(data)} bytes is over the limit of {limits.max_bytes}")
    kind = sniff(data)
    if kind is None:
        return Rejected("unsupported_type", "not a JPEG, PNG, WebP or GIF image")
    try:
        image = Image.open(io.BytesIO(data), formats=[_PIL_FORMAT[kind]])
    except Image.DecompressionBombError as exc:
        return Rejected("decompression_bomb", str(exc))
    except Exception as exc:  # noqa: BLE001 - any decoder failure on hostile input is a rejection
        return Rejected("corrupt", f"unreadable {kind}: {type(exc).__name__}")
    with image:
        width, height = image.size
        if width < 1 or height < 1:
            return Rejected("corrupt", "the image has no pixels")
        pixels = width * height
        if pixels > limits.max_pixels:
            reason = "decompression_bomb" if pixels > BOMB_PIXELS_PER_BYTE * len(data) else "too_many_pixels"
            return Rejected(reason, f"{width}x{height} is over the limit of {limits.max_pixels} pixels")
        if kind == "jpeg":
            image.draft(image.mode, _draft_box(width, height, limits.max_side))
        needed = decode_bytes(image.size, image.mode)
        if needed > limits.decode_bytes:
            return Rejected(
                "too_many_pixels",
                f"{width}x{height} needs about {needed} bytes to decode, over the budget of {limits.decode_bytes}",
            )
        try:
            image.seek(0)
            image.load()
        except Image.DecompressionBombError as exc:
            return Rejected("decompression_bomb", str(exc))
        except Exception as exc:  # noqa: BLE001
            text = str(exc).lower()
            if "truncated" in text or "end of file" in text or isinstance(exc, EOFError):
                return Rejected("truncated", f"the {kind} file ends early")
            return Rejected("corrupt", f"unreadable {kind}: {type(exc).__name__}")
        return _rebuild(image, kind, limits)


# Bytes Pillow keeps per pixel by mode (RGB is stored in 4); modes not listed take 4.
_PIXEL_BYTES = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16B": 2, "I;16L": 2}


def decode_bytes(size: tuple[int, int], mode: str) -> int:
    """Peak memory to decode an image of this size and mode and rebuild it: the decoded pixels plus one
    RGB(A) copy (the conversion or the resize's)."""
    width, height = size
    return width * height * (_PIXEL_BYTES.get(mode, 4) + 4)


def _draft_box(width: int, height: int, max_side: int) -> tuple[int, int]:
    """The smallest size the JPEG decoder may scale down to and still cover the capped output."""
    factor = min(1.0, max_side / max(width, height))
    return max(1, math.ceil(width * factor)), max(1, math.ceil(height * factor))


_TRANSPOSE = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}


def _orientation(image: Image.Image) -> int:
    try:
        return int(image.getexif().get(ORIENTATION_TAG, 1))
    except Exception:  # noqa: BLE001 - a broken EXIF block is dropped, not trusted
        return 1


def _rebuild(image: Image.Image, kind: str, limits: Limits) -> Processed:
    """Resizes before rotating (rotation is then a quarter of the work) and copies pixels only, no metadata."""
    orientation = _orientation(image)
    alpha = image.mode in ("RGBA", "LA", "PA", "RGBa") or (image.mode == "P" and "transparency" in image.info)
    if alpha:
        fmt, ext, mode = "PNG", "png", "RGBA"
    else:
        fmt, ext, mode = "JPEG", "jpg", "L" if image.mode in ("L", "1") else "RGB"
    out = image if image.mode == mode else image.convert(mode)
    if max(out.size) > limits.max_side:
        out = out.copy() if out is image else out
        out.thumbnail((limits.max_side, limits.max_side), Image.Resampling.BICUBIC, reducing_gap=2.0)
    if orientation in _TRANSPOSE:
        out = out.transpose(_TRANSPOSE[orientation])
    out.info = {}
    buffer = io.BytesIO()
    if fmt == "JPEG":
        out.save(buffer, "JPEG", quality=JPEG_QUALITY, exif=b"", icc_profile=None, comment=b"")
    else:
        out.save(buffer, "PNG", exif=b"", icc_profile=None)
    return Processed(
        data=buffer.getvalue(),
        content_type=CONTENT_TYPES[ext],
        ext=ext,
        width=out.width,
        height=out.height,
        score=quality_score(out),
        source_type=kind,
    )


def quality_score(image: Image.Image) -> float:
    grey = image.convert("L")
    if max(grey.size) > _SCORE_SIDE:
        grey.thumbnail((_SCORE_SIDE, _SCORE_SIDE), Image.Resampling.BILINEAR)
    laplacian = grey.filter(ImageFilter.Kernel((3, 3), [0, 1, 0, 1, -4, 1, 0, 1, 0], scale=1, offset=128))
    variance = ImageStat.Stat(laplacian).var[0]
    sharpness = variance / (variance + 150.0)
    histogram = grey.histogram()
    total = sum(histogram) or 1
    mean = sum(i * n for i, n in enumerate(histogram)) / total
    clipped = (sum(histogram[:5]) + sum(histogram[251:])) / total
    exposure = (1.0 - abs(mean - 128.0) / 128.0) * (1.0 - clipped)
    return round(max(0.0, min(1.0, 0.6 * sharpness + 0.4 * exposure)), 4)


def original_path(data_dir: Path, media_id: uuid.UUID) -> Path:
    """Where the uploaded bytes wait, never served: {data_dir}/media/original/{id}."""
    return Path(data_dir) / "media" / "original" / str(media_id)


def processed_file(data_dir: Path, media_id: uuid.UUID, ext: str) -> Path:
    """The rebuilt image, the only file ever served: {data_dir}/media/{id}.{ext}."""
    return Path(data_dir) / "media" / f"{media_id}.{ext}"
