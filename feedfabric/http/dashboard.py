"""GET /dashboard: the admin's comparison of the feeds, as charts (Chart.js, served from the package).

The numbers are computed on read from the feed log (feedfabric.db.feed_stats), the same that
`feedStats` and `rankerModels` serve, and embedded in the page as JSON, so the page needs no
second request and no token in script. Anyone but an admin gets a plain 403 page. A browser sends
the admin's bearer token in the Authorization header (as every other route takes it).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from feedfabric.core import tracing
from feedfabric.core.errors import FeedFabricError
from feedfabric.db import feed_stats
from feedfabric.db import foryou as foryou_db
from feedfabric.feeds.viewer import resolve_viewer
from feedfabric.http import journeys
from feedfabric.http.static import StaticFolder
from feedfabric.resources import Resources

__all__ = ["recent_journeys", "routes"]

DAYS = 14
STATIC = Path(__file__).resolve().parents[1] / "static" / "dashboard"
JOURNEYS = 10
_SECURITY = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


def routes() -> list[BaseRoute]:
    return [
        Route("/dashboard", dashboard, methods=["GET"]),
        Mount("/static/dashboard", StaticFolder(directory=STATIC), name="dashboard-static"),
    ]


def _refused(status: int, message: str) -> Response:
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>FeedFabric dashboard</title>
<link rel="stylesheet" href="/static/dashboard/dashboard.css"></head>
<body><main class="refused"><h1>{status}</h1><p>{html.escape(message)}</p></main></body></html>"""
    return HTMLResponse(page, status, headers=_SECURITY)


def recent_journeys(resources: Resources) -> list[dict[str, Any]]:
    """The newest post journeys from this process's ring and the traces the other processes wrote
    (FEEDFABRIC_DATA_DIR/traces, in dev); empty when tracing keeps no recent traces."""
    own = resources.tracing.recent.spans() if resources.tracing and resources.tracing.recent else []
    written = tracing.read_recent(resources.settings.feedfabric_data_dir / tracing.TRACES_DIR)
    return [j.to_json() for j in journeys.journeys([*own, *written], JOURNEYS)]


async def data(resources: Resources) -> dict[str, Any]:
    days = await feed_stats.by_day(resources.pool, DAYS)
    positions = await feed_stats.by_position(resources.pool, DAYS)
    models = await foryou_db.models(resources.pool, 10)
    return {
        "days": [
            {
                "day": d.day.date().isoformat(),
                "feed": d.feed,
                "preset": d.preset,
                "pagesServed": d.pages_served,
                "postsServed": d.posts_served,
                "postsEngaged": d.posts_engaged,
                "engagementRate": d.engagement_rate,
            }
            for d in days
        ],
        "positions": [
            {"position": p.position, "postsServed": p.posts_served, "postsEngaged": p.posts_engaged} for p in positions
        ],
        "models": [
            {
                "id": m.id,
                "trainedAt": m.trained_at.isoformat(),
                "trainingRows": m.training_rows,
                "auc": m.auc,
                "baselineAuc": m.baseline_auc,
                "active": m.active,
                "weights": dict(zip(m.signals, m.weights, strict=True)),
            }
            for m in models
        ],
        "journeys": recent_journeys(resources),
    }


async def dashboard(request: Request) -> Response:
    resources: Resources = request.app.state.resources
    try:
        viewer = (
            await resolve_viewer(
                resources.pool, resources.settings, resources.tokens, request.headers.get("authorization")
            )
        ).get()
    except FeedFabricError:
        return _refused(403, "The dashboard is for admins: sign in with an admin token.")
    if viewer.claims is None or not viewer.claims.is_admin:
        return _refused(403, "The dashboard is for admins: sign in with an admin token.")
    # JSON in a script element: escaping "<" keeps "</script>" in any value from ending it.
    payload = orjson.dumps(await data(resources)).decode().replace("<", "\\u003c")
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>FeedFabric dashboard</title>
<link rel="stylesheet" href="/static/dashboard/dashboard.css"></head>
<body>
<header><h1>Which feed and which preset do readers engage with?</h1>
<p>The last {DAYS} days of the feed log, today included; a served post counts as engaged when its reader liked,
commented on or reposted it within 24 hours.</p></header>
<main>
<section><h2>Engagement rate per day</h2><canvas id="rate-by-day" role="img" aria-label="engagement rate per day"></canvas></section>
<section><h2>Posts served and engaged per feed</h2><canvas id="served-by-feed" role="img" aria-label="served and engaged"></canvas></section>
<section><h2>Engagement by position</h2><canvas id="by-position" role="img" aria-label="engagement by position"></canvas></section>
<section><h2>Ranker models: AUC against BALANCED</h2><canvas id="model-auc" role="img" aria-label="model AUC"></canvas></section>
<section><h2>Weights of the newest model</h2><canvas id="model-weights" role="img" aria-label="model weights"></canvas></section>
<section><h2>Per day, feed and preset</h2><table id="days-table"></table></section>
<section id="journeys" class="wide"><h2>Journeys: recent posts from the mutation to the last socket</h2>
<p class="note">Each post's trace, step by step (milliseconds from the request's start), a bar for each consumer
group that applied it; the slowest step is highlighted. Empty unless tracing keeps recent traces (on in <code>feedfabric dev</code>).</p>
<div id="journey-list"></div></section>
</main>
<script type="application/json" id="dashboard-data">{payload}</script>
<script src="/static/vendor/chart.js/dist/chart.umd.min.js"></script>
<script src="/static/dashboard/dashboard.js"></script>
</body></html>"""
    return HTMLResponse(page, headers=_SECURITY)
