"""Media worker throughput: 12-megapixel JPEG photos per second through the rebuild pipeline.

Times `media.process_image` (sniff, header scan, decode, EXIF orientation,
resize to the 2048 px cap, JPEG re-encode without metadata, quality score) on
a synthetic 4000 × 3000 photo with camera EXIF, one photo at a time as the
worker does. CPU time per photo is printed beside wall time: on a shared
machine it is the steadier figure. The database update and file writes around it are a few
milliseconds and are left out.

    .venv/bin/python bench/media.py [--photos 20]
"""

from __future__ import annotations

import argparse
import io
import os
import time

from feedfabric.feeds import photos as media
from PIL import Image, ImageFilter


def camera_photo(width: int = 4000, height: int = 3000) -> bytes:
    """Smooth gradients plus sensor-like noise, so the JPEG is photo-sized (several MB), with EXIF."""
    base = Image.merge(
        "RGB",
        [
            Image.linear_gradient("L").resize((width, height)),
            Image.radial_gradient("L").resize((width, height)),
            Image.linear_gradient("L").rotate(90).resize((width, height)),
        ],
    )
    noise = Image.effect_noise((width, height), 40).filter(ImageFilter.GaussianBlur(0.6)).convert("RGB")
    image = Image.blend(base, noise, 0.35)
    exif = Image.Exif()
    exif[0x010F], exif[0x0110], exif[0x0112] = "BenchCam", "Model 12", 6
    out = io.BytesIO()
    image.save(out, "JPEG", quality=92, exif=exif)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=int, default=20)
    args = parser.parse_args()
    data = camera_photo()
    limits = media.Limits()
    result = media.process_image(data, limits)  # warm-up
    assert isinstance(result, media.Processed), result
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(args.photos):
        media.process_image(data, limits)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    print(
        f"{args.photos} photos of 4000x3000 ({len(data) / 1e6:.1f} MB JPEG) in {elapsed:.2f} s: "
        f"{args.photos / elapsed:.1f} photos/s, {1000 * elapsed / args.photos:.0f} ms each "
        f"(one at a time, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
        f"{1000 * cpu / args.photos:.0f} ms CPU each); output {result.width}x{result.height}, "
        f"{len(result.data) / 1e3:.0f} KB, score {result.score}"
    )


if __name__ == "__main__":
    main()
