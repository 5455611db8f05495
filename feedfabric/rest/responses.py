"""JSON responses encoded by orjson (feedfabric.core.jsonwire), for every route and refusal."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse as _StarletteJSONResponse

__all__ = ["JSONResponse"]


class JSONResponse(_StarletteJSONResponse):
    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
