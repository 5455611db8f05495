// Draws the dashboard's charts from the JSON the server embedded in the page (Chart.js, vendored).
(() => {
  "use strict";
  const data = JSON.parse(document.getElementById("dashboard-data").textContent);
  const palette = ["#2f6fdf", "#e0703a", "#2a9d6f", "#9b59b6", "#c0392b", "#7f8c8d", "#d4a017", "#16a085"];
  const label = (row) => (row.preset ? `${row.feed} · ${row.preset}` : row.feed);
  const pct = (v) => `${(v * 100).toFixed(1)}%`;
  const charts = {};

  function draw(id, config) {
    const canvas = document.getElementById(id);
    config.options = Object.assign({ animation: false, responsive: true, maintainAspectRatio: false }, config.options);
    canvas.parentElement.style.height = "300px";
    charts[id] = new Chart(canvas, config);
    canvas.dataset.rendered = "true";
  }

  const days = [...new Set(data.days.map((r) => r.day))].sort();
  const series = [...new Set(data.days.map(label))].sort();
  draw("rate-by-day", {
    type: "line",
    data: {
      labels: days,
      datasets: series.map((name, i) => ({
        label: name,
        borderColor: palette[i % palette.length],
        backgroundColor: palette[i % palette.length],
        data: days.map((day) => {
          const row = data.days.find((r) => r.day === day && label(r) === name);
          return row ? row.engagementRate : null;
        }),
      })),
    },
    options: { scales: { y: { min: 0, ticks: { callback: pct } } }, spanGaps: true },
  });

  const totals = series.map((name) => {
    const rows = data.days.filter((r) => label(r) === name);
    return {
      served: rows.reduce((s, r) => s + r.postsServed, 0),
      engaged: rows.reduce((s, r) => s + r.postsEngaged, 0),
    };
  });
  draw("served-by-feed", {
    type: "bar",
    data: {
      labels: series,
      datasets: [
        { label: "posts served", backgroundColor: "#9db7e8", data: totals.map((t) => t.served) },
        { label: "posts engaged", backgroundColor: "#2f6fdf", data: totals.map((t) => t.engaged) },
      ],
    },
  });

  draw("by-position", {
    type: "bar",
    data: {
      labels: data.positions.map((p) => p.position + 1),
      datasets: [
        {
          label: "engagement rate",
          backgroundColor: "#2a9d6f",
          data: data.positions.map((p) => (p.postsServed ? p.postsEngaged / p.postsServed : 0)),
        },
      ],
    },
    options: { scales: { x: { title: { display: true, text: "position on the page" } }, y: { min: 0, ticks: { callback: pct } } } },
  });

  const models = [...data.models].reverse();
  draw("model-auc", {
    type: "bar",
    data: {
      labels: models.map((m) => `#${m.id}${m.active ? " (active)" : ""}`),
      datasets: [
        { label: "model AUC", backgroundColor: "#9b59b6", data: models.map((m) => m.auc) },
        { label: "BALANCED AUC", backgroundColor: "#bdc3c7", data: models.map((m) => m.baselineAuc) },
      ],
    },
    options: { scales: { y: { min: 0.4, max: 1 } } },
  });

  const newest = data.models[0];
  draw("model-weights", {
    type: "bar",
    data: {
      labels: newest ? Object.keys(newest.weights) : [],
      datasets: [
        {
          label: newest ? `model #${newest.id}` : "no model yet",
          backgroundColor: "#e0703a",
          data: newest ? Object.values(newest.weights) : [],
        },
      ],
    },
    options: { indexAxis: "y" },
  });

  const table = document.getElementById("days-table");
  const head = table.createTHead().insertRow();
  for (const [text, cls] of [["day"], ["feed"], ["pages", "num"], ["served", "num"], ["engaged", "num"], ["rate", "num"]]) {
    const th = document.createElement("th");
    th.textContent = text;
    if (cls) th.className = cls;
    head.appendChild(th);
  }
  const body = table.createTBody();
  for (const r of data.days) {
    const tr = body.insertRow();
    for (const [value, num] of [[r.day], [label(r)], [r.pagesServed, 1], [r.postsServed, 1], [r.postsEngaged, 1], [pct(r.engagementRate), 1]]) {
      const td = tr.insertCell();
      td.textContent = value;
      if (num) td.className = "num";
    }
  }
  // Journeys: one waterfall per post, each step a floating bar from its start to its end.
  const STEP_COLOURS = {
    mutation: "#2f6fdf", "outbox wait": "#bdc3c7", relay: "#9b59b6", broker: "#7f8c8d", consumer: "#e67e22",
    "fan-out batch": "#2a9d6f", "timeline write": "#16a085", delivery: "#d4a017",
  };
  const SLOWEST = "#c0392b";
  const ms = (v) => `${v.toFixed(1)} ms`;
  const list = document.getElementById("journey-list");
  if (!data.journeys.length) {
    const p = document.createElement("p");
    p.className = "note";
    p.id = "no-journeys";
    p.textContent = "No traced posts yet.";
    list.appendChild(p);
  }
  data.journeys.forEach((journey, n) => {
    const box = document.createElement("div");
    box.className = "journey";
    const title = document.createElement("h3");
    const slowest = journey.bars[journey.slowest];
    title.append(
      `${new Date(journey.startedAtMs).toISOString().replace("T", " ").slice(0, 19)} · post ${journey.postId || "?"}` +
        ` · trace ${journey.traceId} · ${ms(journey.totalMs)} · `,
    );
    const hot = document.createElement("span");
    hot.className = "slowest";
    hot.textContent = `slowest: ${slowest.label} (${ms(slowest.durationMs)})`;
    title.appendChild(hot);
    const holder = document.createElement("div");
    const canvas = document.createElement("canvas");
    canvas.id = `journey-${n}`;
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", `journey of post ${journey.postId || journey.traceId}`);
    holder.appendChild(canvas);
    box.append(title, holder);
    list.appendChild(box);
    const config = {
      type: "bar",
      data: {
        labels: journey.bars.map((b) => b.label),
        datasets: [
          {
            label: "step (ms from the request's start)",
            data: journey.bars.map((b) => [b.startMs, b.startMs + b.durationMs]),
            backgroundColor: journey.bars.map((b, i) => (i === journey.slowest ? SLOWEST : STEP_COLOURS[b.step] || "#999")),
          },
        ],
      },
      options: {
        indexAxis: "y",
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        plugins: {
          legend: { display: false },
          tooltip: { callbacks: { label: (c) => `${journey.bars[c.dataIndex].service}: ${ms(journey.bars[c.dataIndex].durationMs)}` } },
        },
        scales: { x: { min: 0, title: { display: true, text: "ms" } } },
      },
    };
    holder.style.height = `${40 + 22 * journey.bars.length}px`;
    charts[canvas.id] = new Chart(canvas, config);
    canvas.dataset.rendered = "true";
  });

  window.dashboardCharts = charts;
  document.body.dataset.ready = "true";
})();
