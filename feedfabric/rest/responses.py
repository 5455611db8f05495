"""JSON responses encoded by orjson (feedfabric.core.jsonwire), for every route and refusal."""

from __future__ import annotations

import orjson
from starlette.responses import JSONResponse as _StarletteJSONResponse

__all__ = ["JSONResponse"]


class JSONResponse(_StarletteJSONResponse):
    def render(self, content: object) -> bytes:
        return orjson.dumps(content)
