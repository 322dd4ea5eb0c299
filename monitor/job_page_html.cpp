// The job's web page (monitor/job_web.hpp): one document, its script and style inside, nothing
// fetched from elsewhere. It polls /data every second with the token it was opened with, draws
// the curves on canvases (validation loss beside the training loss), the grid as tiles coloured
// by state (paged), the timeline and the memory by node. Element ids and data- attributes are
// what tests read (docs/web.md); the body's data-first-render-ms and data-render-ms say, on the
// page's own clock, when the first data was drawn (from the navigation's start) and how long
// drawing it took.

#include "monitor/job_web.hpp"

namespace troupe::monitor {

std::string_view job_page_html() {
  return R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Troupe job</title>
<style>
body{font:14px system-ui,sans-serif;margin:16px;background:#fafafa;color:#222}
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:16px 0 6px}
#summary span{margin-right:18px}
.charts{display:flex;flex-wrap:wrap;gap:10px}
.chart{background:#fff;border:1px solid #ddd;padding:4px}
.chart div{font-size:12px;color:#555}.chart .val{color:#ef6c00}
#grid{display:flex;flex-wrap:wrap;gap:3px;max-width:1200px}
.tile{width:54px;height:38px;border-radius:3px;font-size:10px;padding:2px;box-sizing:border-box;color:#fff;overflow:hidden}
.tile[data-state=training]{background:#2e7d32}.tile[data-state=waiting]{background:#f9a825;color:#222}
.tile[data-state=straggling]{background:#ef6c00}.tile[data-state=lost]{background:#c62828}
.tile[data-state=recovering]{background:#1565c0}.tile[data-state=starting]{background:#9e9e9e}
.tile[data-state=done]{background:#546e7a}
table{border-collapse:collapse;background:#fff}td,th{border:1px solid #ddd;padding:2px 6px;font-size:12px;text-align:left}
#legend span{display:inline-block;margin-right:10px;font-size:12px}
#error{color:#c62828}
</style></head><body>
<h1>Troupe job</h1>
<div id="summary"></div><div id="error"></div>
<h2>Curves</h2>
<div class="charts">
<div class="chart"><div>loss, <span class="val">validation loss</span></div><canvas id="chart-loss" width="360" height="160"></canvas></div>
<div class="chart"><div>learning rate</div><canvas id="chart-lr" width="360" height="160"></canvas></div>
<div class="chart"><div>grad norm</div><canvas id="chart-grad_norm" width="360" height="160"></canvas></div>
<div class="chart"><div>tokens/s</div><canvas id="chart-tokens_per_second" width="360" height="160"></canvas></div>
</div>
<h2>Ranks <span id="states"></span></h2>
<div id="pager"><button id="prev">&lt;</button> page <span id="page-no">1</span> of <span id="page-count">1</span> <button id="next">&gt;</button></div>
<div id="grid"></div>
<h2>Timeline</h2>
<table id="timeline"><thead><tr><th>time</th><th>attempt</th><th>event</th><th>path</th><th>seconds</th><th>bytes</th><th>what</th></tr></thead><tbody></tbody></table>
<h2>Memory by node</h2>
<table id="memory"><thead><tr><th>node</th><th>host</th><th>resident</th><th>by kind (now / peak)</th></tr></thead><tbody></tbody></table>
<script>
"use strict";
const token = new URLSearchParams(location.search).get("token") || "";
let page = 0, pages = 1;
const perPage = 256;
document.getElementById("prev").onclick = () => { if (page > 0) { page--; poll(); } };
document.getElementById("next").onclick = () => { if (page + 1 < pages) { page++; poll(); } };
function el(tag, text) { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; return e; }
function bytes(n) { const u = ["B","KiB","MiB","GiB","TiB"]; let i = 0; while (n >= 1024 && i < 4) { n /= 1024; i++; } return n.toFixed(i ? 1 : 0) + " " + u[i]; }
// Draws each series [key, colour] of `points` that has a value, on one scale.
function draw(id, points, series) {
  const c = document.getElementById(id), g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  const lines = series.map(([key, colour]) => [key, colour, points.filter(q => Number.isFinite(q[key]))]);
  const all = lines.flatMap(([key, , p]) => p.map(q => q[key])), steps = lines.flatMap(([, , p]) => p.map(q => q.step));
  if (all.length === 0) return;
  let lo = Math.min(...all), hi = Math.max(...all);
  if (hi === lo) { hi += 1; lo -= 1; }
  const s0 = Math.min(...steps), s1 = Math.max(...steps, s0 + 1), W = c.width - 50, H = c.height - 20;
  g.fillStyle = "#555"; g.font = "10px sans-serif";
  g.fillText(hi.toPrecision(4), 0, 10); g.fillText(lo.toPrecision(4), 0, H);
  g.fillText("step " + s0, 50, H + 14); g.fillText(String(s1), c.width - 30, H + 14);
  for (const [key, colour, p] of lines) {
    g.strokeStyle = g.fillStyle = colour; g.beginPath();
    p.forEach((q, i) => { const x = 50 + (q.step - s0) / (s1 - s0) * W, y = 5 + (hi - q[key]) / (hi - lo) * (H - 5);
      if (i) g.lineTo(x, y); else g.moveTo(x, y);
      if (p.length < 64) g.fillRect(x - 2, y - 2, 4, 4); });
    g.stroke();
  }
}
function render(d) {
  const j = d.job;
  const s = document.getElementById("summary"); s.replaceChildren();
  const validated = d.curve.filter(q => Number.isFinite(q.val_loss));
  const val = el("span", validated.length ? "val loss " + validated[validated.length - 1].val_loss.toFixed(4) +
                 " (step " + validated[validated.length - 1].step + ")" : "val loss -");
  val.id = "val-loss";
  s.append(el("span", "step " + j.step + " / " + j.total_steps), el("span", "loss " + j.loss.toFixed(4)), val,
           el("span", Math.round(j.tokens_per_second) + " tok/s"), el("span", "attempt " + j.attempt),
           el("span", "grid " + j.grid.map(a => a.name + " " + a.size).join(" × ")));
  draw("chart-loss", d.curve, [["loss", "#1565c0"], ["val_loss", "#ef6c00"]]);
  for (const key of ["lr", "grad_norm", "tokens_per_second"]) draw("chart-" + key, d.curve, [[key, "#1565c0"]]);
  pages = Math.max(d.ranks.pages, 1);
  document.getElementById("page-no").textContent = d.ranks.page + 1;
  document.getElementById("page-count").textContent = pages;
  document.getElementById("states").textContent =
    Object.entries(d.ranks.states).filter(e => e[1] > 0).map(e => e[0] + " " + e[1]).join(", ");
  const grid = document.getElementById("grid"); grid.replaceChildren();
  for (const t of d.ranks.tiles) {
    const tile = el("div"); tile.className = "tile"; tile.dataset.state = t.state; tile.dataset.rank = t.rank;
    tile.id = "rank-" + t.rank; tile.dataset.recoveries = t.recoveries;
    tile.title = "rank " + t.rank + " (node " + t.node + ", " + j.grid.map((a, i) => a.name + " " + t.at[i]).join(" ") + "): " + t.state +
      (t.waiting_for ? ", waiting for " + t.waiting_for : "") + "; " + t.activity +
      (t.recoveries ? "; recovered " + t.recoveries + " time(s)" : "") + "; heartbeat " +
      (t.heard_seconds_ago < 0 ? "none" : t.heard_seconds_ago.toFixed(1) + " s ago");
    if (t.state_seconds >= 0) { tile.dataset.stateSeconds = t.state_seconds.toFixed(1); tile.title += "; " + t.state + " for " + t.state_seconds.toFixed(1) + " s"; }
    // The second line: how long a lost or recovering rank has been so, else its last heartbeat.
    tile.append(el("div", "r" + t.rank + " " + t.state),
                el("div", (t.state_seconds >= 0 ? "for " + t.state_seconds.toFixed(1) + "s" :
                           t.heard_seconds_ago < 0 ? "-" : t.heard_seconds_ago.toFixed(1) + "s") +
      (t.recoveries ? " \u21bb" + t.recoveries : "")));
    grid.append(tile);
  }
  const tl = document.querySelector("#timeline tbody"); tl.replaceChildren();
  for (const e of d.timeline) {
    const tr = el("tr"); tr.dataset.kind = e.kind;
    tr.append(el("td", new Date(e.unix_seconds * 1000).toLocaleTimeString()), el("td", e.attempt), el("td", e.kind),
              el("td", e.route), el("td", e.seconds ? e.seconds.toFixed(3) : ""), el("td", e.bytes ? bytes(e.bytes) : ""),
              el("td", e.text));
    tl.append(tr);
  }
  const mem = document.querySelector("#memory tbody"); mem.replaceChildren();
  for (const n of d.memory) {
    const tr = el("tr");
    tr.append(el("td", n.node), el("td", n.host), el("td", bytes(n.resident_bytes)),
              el("td", n.kinds.filter(k => k.kind !== "total").map(k => k.device + " " + k.kind + " " + bytes(k.bytes) + " / " + bytes(k.peak)).join("; ")));
    mem.append(tr);
  }
}
async function poll() {
  try {
    const r = await fetch("data?page=" + page + "&per_page=" + perPage, {headers: {"Authorization": "Bearer " + token}});
    if (!r.ok) throw new Error("HTTP " + r.status);
    const d = await r.json(), start = performance.now();
    render(d);
    void document.body.offsetHeight;  // the layout of what was drawn, inside the figure
    if (!document.body.dataset.firstRenderMs) {
      document.body.dataset.renderMs = (performance.now() - start).toFixed(1);
      document.body.dataset.firstRenderMs = performance.now().toFixed(1);
    }
    document.getElementById("error").textContent = "";
    document.body.dataset.updated = Date.now();
  } catch (e) { document.getElementById("error").textContent = "no data: " + e.message; }
}
poll(); setInterval(poll, 1000);
</script></body></html>
)html";
}

}  // namespace troupe::monitor
