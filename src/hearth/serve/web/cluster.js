// The cluster page: the ring as a picture and a table, redrawn from each snapshot the server
// streams on /v1/cluster/events (the data /metrics is made from).
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

function fmt(x, digits = 1) {
  return x === null || x === undefined || Number.isNaN(x) ? "–" : Number(x).toFixed(digits);
}

function windows(d) {
  if (!d.windows || d.windows.length === 0) return "–";
  return d.windows.map((w) => (w[1] > w[0] ? `${w[0]}–${w[1] - 1}` : "none")).join(", ");
}

function card(label, value) {
  const c = document.createElement("div");
  c.className = "card";
  const l = document.createElement("div");
  l.className = "label";
  l.textContent = label;
  const v = document.createElement("div");
  v.className = "value";
  v.textContent = value;
  c.append(l, v);
  return c;
}

function drawCards(s) {
  $("cards").replaceChildren(
    card("devices", s.ring ? `${s.devices.length} of ${s.devices_at_start}` : "1 (no ring)"),
    card("rounds k", s.rounds ?? "–"),
    card("TPOT measured ms", fmt(s.tpot_ms)),
    card("TPOT predicted ms", fmt(s.predicted_tpot_ms)),
    card("tokens/s now", fmt(s.tokens_per_s)),
    card("requests active / waiting", `${s.active} / ${s.queued}`),
    card("recoveries / rejoins", `${s.recoveries ?? 0} / ${s.rejoins ?? 0}`),
    card("tokens generated", s.tokens_generated));
}

function el(name, attrs, text) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// A device's short label: worker names are often their address; drop the scheme.
function label(name) {
  const n = name.replace(/^tcp:\/\//, "");
  return n.length > 18 ? n.slice(0, 17) + "…" : n;
}

// Devices on a circle in ring order, the head on top; the token goes round clockwise. Each
// shows its layers and memory pressure; lost devices are drawn dashed.
function drawRing(s) {
  const svg = $("ring");
  svg.replaceChildren();
  const cx = 200, cy = 150, r = 100;
  svg.append(el("circle", { class: "track", cx, cy, r }));
  const nodes = s.devices.map((d) => ({ d, lost: false }))
      .concat((s.lost || []).map((a) => ({ d: { name: a, windows: [] }, lost: true })));
  nodes.forEach((n, i) => {
    const a = -Math.PI / 2 + (2 * Math.PI * i) / nodes.length;
    const x = cx + r * Math.cos(a), y = cy + r * Math.sin(a);
    const g = el("g", { class: "device" });
    g.append(el("rect", { class: "node" + (n.lost ? " lost" : ""), x: x - 62, y: y - 24,
                          width: 124, height: 48, rx: 10 }));
    g.append(el("text", { x, y: y - 7 }, label(n.d.name)));
    g.append(el("text", { class: "small", x, y: y + 7 },
                n.lost ? "lost" : "layers " + windows(n.d)));
    if (!n.lost) {
      g.append(el("text", { class: "small", x, y: y + 19 },
                  `${fmt((n.d.pressure || 0) * 100)}% memory`));
    }
    svg.append(g);
  });
  if (s.active > 0 && nodes.length > 1) {
    // While requests run, a dot after the device that computes longest per token.
    let busiest = 0;
    s.devices.forEach((d, i) => {
      if ((d.compute_ms || 0) > (s.devices[busiest].compute_ms || 0)) busiest = i;
    });
    const a = -Math.PI / 2 + (2 * Math.PI * (busiest + 0.5)) / nodes.length;
    svg.append(el("circle", { class: "token", cx: cx + r * Math.cos(a),
                              cy: cy + r * Math.sin(a), r: 6 }));
  }
}

function drawTable(s) {
  const rows = s.devices.map((d, i) => {
    const tr = document.createElement("tr");
    const cells = [String(i), d.name + (d.address && d.address !== "head" && d.address !== d.name
                                            ? ` (${d.address})` : ""),
                   windows(d), null, fmt(d.compute_ms), fmt(d.wait_ms), fmt(d.disk_mb),
                   fmt(d.reload_mb), fmt(d.link_rtt_ms, 2), String(d.steps)];
    cells.forEach((c, j) => {
      const td = document.createElement("td");
      if (j === 3) {
        const bar = document.createElement("div");
        bar.className = "bar";
        const fill = document.createElement("span");
        fill.style.width = `${Math.min(100, (d.pressure || 0) * 100)}%`;
        bar.append(fill);
        td.append(bar, `${fmt((d.pressure || 0) * 100)}% (max ${fmt((d.pressure_max || 0) * 100)}%)`);
      } else {
        td.textContent = c;
      }
      tr.append(td);
    });
    return tr;
  });
  $("devices").replaceChildren(...rows);
  $("lost").textContent = s.lost && s.lost.length ? "lost: " + s.lost.join(", ") : "";
}

function draw(s) {
  $("model").textContent = s.model;
  drawCards(s);
  drawRing(s);
  drawTable(s);
  document.body.dataset.snapshots = String(Number(document.body.dataset.snapshots || 0) + 1);
}

async function follow() {
  for (;;) {
    try {
      const r = await Hearth.request("/v1/cluster/events");
      if (!r.ok) throw new Error(await Hearth.errorText(r));
      $("status").textContent = "live";
      $("status").className = "status ok";
      await Hearth.readEvents(r, draw);
    } catch (e) {
      $("status").textContent = "reconnecting: " + e.message;
      $("status").className = "status bad";
    }
    await new Promise((res) => setTimeout(res, 2000));
  }
}

window.addEventListener("DOMContentLoaded", follow);
