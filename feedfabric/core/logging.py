"""Structured JSON logs, one object per line, each carrying the request ID of the request it belongs to.

The request ID comes from the client's X-Request-ID when it looks sane (so a
trace can cross a proxy) or is made fresh; it is echoed on the response and
kept in a ContextVar so every log line written while serving the request,
however deep, carries it without passing it around.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from feedfabric.core.settings import Settings

__all__ = ["SAFE_ID", "JsonFormatter", "access_log", "configure_logging", "request_id_var"]

request_id_var: ContextVar[str | None] = ContextVar("feedfabric_request_id", default=None)

SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
# The attributes every LogRecord has; anything else was passed through `extra=` and is logged as a field.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}
_HANDLER_MARK = "_feedfabric_handler"

access_log = logging.getLogger("feedfabric.access")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id and any `extra=` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = request_id_var.get()
        if request_id:
            entry["request_id"] = request_id
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class _RequestIdFilter(logging.Filter):
    """Adds request_id to text-format records too."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get() or "-"
        return True


def configure_logging(settings: Settings) -> None:
    """Installs one stderr handler on the root logger; calling it again replaces it, never stacks."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _HANDLER_MARK, False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    setattr(handler, _HANDLER_MARK, True)
    if settings.log_format == "text":
        handler.addFilter(_RequestIdFilter())
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"))
    else:
        handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    root.setLevel(settings.log_level.upper())
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    # Uvicorn's own access log would duplicate RequestIdMiddleware's line without the request ID.
    logging.getLogger("uvicorn.access").disabled = True
