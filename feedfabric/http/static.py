"""Static folders whose every failure to find a file is a 404, never a false outage.

Starlette's StaticFiles lets an OSError other than "not found" through (a
symlink loop, a path the filesystem refuses, an encoded dot segment on some
setups), and the request deadline (feedfabric.http.deadline) reads an OSError
as a database out of reach: the client got 503 `service.unavailable` with
`Retry-After`, and the log said "postgres unreachable", a false outage signal
for monitors. No static lookup touches a store, so here any OSError is the
file not being there.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

__all__ = ["StaticFolder"]


class StaticFolder(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        try:
            return await super().get_response(path, scope)
        except OSError:
            raise HTTPException(status_code=404) from None
