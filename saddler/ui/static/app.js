/* saddler run dashboard: graph, timeline, progress, tasks, node and task pages, two runs side by side.
   Data: the JSON API of `saddler ui` (saddler/ui/api.py), or, in report.html, the inline #saddler-data document
   holding the same views. Routes: #/<run>/<view>[/<arg>]. A live page polls /api/<run>/head every 2 s. */
"use strict";
(function () {
  const embedded = document.getElementById("saddler-data");
  const STATIC = embedded ? JSON.parse(embedded.textContent) : null;
  const POLL_MS = 2000;
  const state = { runs: [], run: 0, view: "graph", arg: null, lastEvent: null, cy: null, compare: [0, 1] };
  const STATUS_COLOURS = {
    baseline: "#5b6b8c", accepted: "#2e9d4f", neutral: "#3b7dd8", rejected: "#d64541",
    invalid: "#333333", pending: "#e0a800",
  };
  const EDGE_STYLES = {
    patch: ["#9aa4b2", "solid"], rebase: ["#3b7dd8", "dashed"], cherry_pick: ["#8e44ad", "dotted"],
    revert: ["#d64541", "dashed"], merge: ["#e67e22", "solid"],
  };
  const PHASE_SHAPES = { baseline: "rectangle", capability: "ellipse", steering: "diamond", mixed: "hexagon" };

  const $ = (sel, root) => (root || document).querySelector(sel);
  function esc(s) {
    return String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g,
      (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }
  function num(x, d) {
    return x === null || x === undefined ? "–" : Number(x).toFixed(d === undefined ? 3 : d);
  }
  function money(x) { return x === null || x === undefined ? "–" : "$" + Number(x).toFixed(2); }
  function href(view, arg, run) {
    return "#/" + (run === undefined ? state.run : run) + "/" + view + (arg === undefined ? "" : "/" + encodeURIComponent(arg));
  }
  function nodeLink(id, run) { return id === null || id === undefined ? "–" : `<a href="${href("node", id, run)}">#${id}</a>`; }
  function badge(word) { return word ? `<span class="badge b-${esc(word)}">${esc(word)}</span>` : "–"; }

  async function api(run, view, arg) {
    if (STATIC) {
      const views = STATIC.runs[run].views;
      const table = view === "node" ? views.nodes : view === "task" ? views.task_pages : null;
      const doc = table ? table[String(arg)] : views[view];
      if (!doc) throw new Error(`no ${view} ${arg === undefined ? "" : arg} in this report`);
      return doc;
    }
    const path = `/api/${run}/${view}` + (arg === undefined || arg === null ? "" : "/" + encodeURIComponent(arg));
    const res = await fetch(path, { cache: "no-store" });
    const doc = await res.json();
    if (!res.ok) throw new Error(doc.error || res.statusText);
    return doc;
  }
  async function runList() {
    if (STATIC) return STATIC.runs.map((r) => r.meta);
    return (await fetch("/api/runs", { cache: "no-store" })).json();
  }

  // --- diffs: one class per line kind -------------------------------------------------------------------------
  function diffHtml(text) {
    if (!text) return '<span class="muted">(no diff)</span>';
    return text.split("\n").map((line) => {
      let cls = "ctx";
      if (line.startsWith("diff --git") || line.startsWith("+++") || line.startsWith("---") || line.startsWith("index ")) cls = "file";
      else if (line.startsWith("@@")) cls = "hunk";
      else if (line.startsWith("+")) cls = "add";
      else if (line.startsWith("-")) cls = "del";
      return `<span class="d-${cls}">${esc(line)}</span>`;
    }).join("\n");
  }

  // --- summary strip ------------------------------------------------------------------------------------------
  async function renderSummary() {
    const s = await api(state.run, "summary");
    const run = s.run, best = s.best, base = s.baseline;
    const it = s.iteration;
    const test = best && best.test_mean !== null && best.test_mean !== undefined
      ? `<span>test ${num(base && base.test_mean)} → <b>${num(best.test_mean)}</b></span>` : "";
    $("#summary").innerHTML = `
      <span class="run-name">${esc((state.runs[state.run] || {}).name || "run")}</span>
      ${badge(run.status)}
      <span>iteration ${it ? it.number : "–"}</span>
      <span>best ${nodeLink(best && best.id)} dev <b>${num(best && best.dev_mean)}</b> (baseline ${num(base && base.dev_mean)})</span>
      ${test}
      <span>nodes ${s.nodes.total}</span>
      <span>rollouts ${s.rollouts.count} (${money(s.rollouts.cost)})</span>
      <span>sessions ${s.sessions.count} (${money(s.sessions.cost)})</span>`;
  }

  // --- graph --------------------------------------------------------------------------------------------------
  function graphElements(g) {
    const lineage = new Set(g.best_lineage);
    const nodes = g.nodes.map((n) => ({
      data: {
        id: "n" + n.id, nid: n.id, label: `#${n.id}${n.dev_mean === null ? "" : "\n" + num(n.dev_mean, 2)}`,
        colour: STATUS_COLOURS[n.status] || "#999", shape: PHASE_SHAPES[n.phase] || "round-rectangle",
        size: 22 + 26 * (n.dev_mean === null ? 0 : n.dev_mean), title: n.title, status: n.status,
      },
      classes: (lineage.has(n.id) ? "lineage " : "") + (n.id === g.best_id ? "best" : ""),
    }));
    const edges = g.edges.map((e) => ({
      data: {
        id: "e" + e.id, source: "n" + e.parent_id, target: "n" + e.child_id, kind: e.kind,
        colour: (EDGE_STYLES[e.kind] || EDGE_STYLES.patch)[0], line: (EDGE_STYLES[e.kind] || EDGE_STYLES.patch)[1],
        label: e.close_call_rounds ? `+${e.close_call_rounds}` : "",
      },
      classes: (lineage.has(e.parent_id) && lineage.has(e.child_id) ? "lineage " : "") + (e.close_call_rounds ? "closecall" : ""),
    }));
    return nodes.concat(edges);
  }
  function drawGraph(container, g, run) {
    const cy = cytoscape({
      container, elements: graphElements(g), minZoom: 0.05, maxZoom: 1.6,
      style: [
        { selector: "node", style: {
          "background-color": "data(colour)", shape: "data(shape)", width: "data(size)", height: "data(size)",
          label: "data(label)", "text-wrap": "wrap", "font-size": 9, "text-valign": "bottom", "text-margin-y": 2,
          color: "#223", "min-zoomed-font-size": 7 } },
        { selector: "edge", style: {
          width: 1.5, "line-color": "data(colour)", "line-style": "data(line)", "target-arrow-shape": "triangle",
          "target-arrow-color": "data(colour)", "curve-style": "bezier", "arrow-scale": 0.7 } },
        { selector: "edge.closecall", style: { label: "data(label)", "font-size": 8, color: "#8e44ad",
          "text-rotation": "autorotate", "text-margin-y": -7,
          "text-background-color": "#fff", "text-background-opacity": 0.8, "min-zoomed-font-size": 7 } },
        { selector: "edge.lineage", style: { width: 3.5, "line-color": "#f1c40f", "target-arrow-color": "#f1c40f" } },
        { selector: "node.lineage", style: { "border-width": 3, "border-color": "#f1c40f" } },
        { selector: "node.best", style: { "border-width": 6, "border-color": "#f39c12" } },
        { selector: "node:selected", style: { "overlay-opacity": 0.2, "overlay-color": "#000" } },
      ],
      layout: { name: "dagre", rankDir: "TB", nodeSep: 18, rankSep: 40, animate: false },
    });
    cy.on("tap", "node", (evt) => { location.hash = href("node", evt.target.data("nid"), run); });
    cy.on("mouseover", "node", (evt) => {
      const d = evt.target.data();
      const tip = $("#graph-tip", container.parentNode);
      if (tip) tip.innerHTML = `<b>#${d.nid}</b> ${badge(d.status)} ${esc(d.title || "")}`;
    });
    return cy;
  }
  function legend() {
    const st = Object.entries(STATUS_COLOURS).map(([k, c]) => `<span><i style="background:${c}"></i>${k}</span>`).join("");
    const ed = Object.entries(EDGE_STYLES).map(([k, v]) => `<span><i class="line" style="border-top:2px ${v[1]} ${v[0]}"></i>${k}</span>`).join("");
    return `<div class="legend">${st}<span class="sep"></span>${ed}<span class="sep"></span>
      <span><i style="background:#fff;border:3px solid #f39c12"></i>best (gold: its lineage)</span>
      <span>"+N" on an edge: a close call, N rounds of extra evidence before the decision</span>
      <span>shape by phase: ○ capability ◇ steering ⬡ mixed ▭ baseline, ▢ other; size and label: dev score</span></div>`;
  }
  async function renderGraph(refresh) {
    const g = await api(state.run, "graph");
    if (refresh && state.cy && state.cy.nodes().length === g.nodes.length) return;
    $("#view").innerHTML = `${legend()}<div id="graph-tip" class="tip">hover a node; click it for its page</div>
      <div id="cy" data-nodes="${g.nodes.length}"></div>`;
    state.cy = drawGraph($("#cy"), g, state.run);
  }

  // --- timeline -----------------------------------------------------------------------------------------------
  function evidenceText(ev) {
    if (!ev || !ev.rounds || !ev.rounds.length) return "";
    return ` <span class="muted" title="${esc(ev.stopped)}">close call: +${ev.rounds.length} round(s), P(better) ${num(ev.confidence, 2)}</span>`;
  }
  async function renderTimeline() {
    const [h, p] = await Promise.all([api(state.run, "history"), api(state.run, "progress")]);
    const at = {};
    p.points.forEach((pt) => { at[pt.iteration] = pt; });
    const rows = h.iterations.map((it) => {
      const pt = at[it.number] || {};
      const reason = it.reason || it.intent || "";
      return `<tr class="iteration" data-number="${it.number}">
        <td>${it.number}</td><td>${esc(it.phase || "–")}${it.exploration ? " (explore)" : ""}</td>
        <td title="${esc(it.batch.join(", "))}">${it.batch.length} task(s)</td>
        <td>${nodeLink(it.parent_id)} → ${nodeLink(it.candidate_id)}</td>
        <td>${num(it.batch_before)} → ${num(it.batch_after)}</td>
        <td>${badge(it.decision || (it.finished ? "" : "running"))}${evidenceText(it.evidence)}</td>
        <td class="reason" title="${esc(reason)}">${esc(reason)}</td>
        <td>${num(it.candidate_dev)}</td><td>${pt.rollouts === undefined ? "–" : pt.rollouts}</td>
        <td>${money(pt.cost)}</td></tr>`;
    }).join("");
    $("#view").innerHTML = `<table class="grid" id="timeline"><thead><tr><th>#</th><th>phase</th><th>batch</th>
      <th>parent → candidate</th><th>batch before → after</th><th>decision</th><th>reason</th><th>dev</th>
      <th>rollouts</th><th>cost</th></tr></thead><tbody>${rows}</tbody></table>`;
  }

  // --- progress plot (SVG, interactive) -----------------------------------------------------------------------
  const AXES = { rollouts: "search rollouts (train + dev)", cost: "cost (USD)", iteration: "iteration" };
  function progressSvg(points, xKey, width, height) {
    const pad = { l: 48, r: 16, t: 12, b: 36 };
    const xs = points.map((pt) => pt[xKey] || 0);
    const devs = points.map((pt) => pt.best_dev).filter((v) => v !== null && v !== undefined);
    const xMax = Math.max(1e-9, ...xs), yMin = Math.min(0, ...devs), yMax = Math.max(1, ...devs);
    const X = (v) => pad.l + (width - pad.l - pad.r) * (v / xMax);
    const Y = (v) => height - pad.b - (height - pad.t - pad.b) * ((v - yMin) / (yMax - yMin || 1));
    let path = "";
    points.forEach((pt, i) => {
      if (pt.best_dev === null || pt.best_dev === undefined) return;
      const x = X(pt[xKey] || 0), y = Y(pt.best_dev);
      path += path ? ` H${x.toFixed(1)} V${y.toFixed(1)}` : `M${x.toFixed(1)},${y.toFixed(1)}`;
      if (i === points.length - 1) path += ` H${X(xMax).toFixed(1)}`;
    });
    const dots = points.map((pt, i) => pt.best_dev === null || pt.best_dev === undefined ? "" :
      `<circle class="pt b-${esc(pt.decision)}" data-i="${i}" cx="${X(pt[xKey] || 0).toFixed(1)}" cy="${Y(pt.best_dev).toFixed(1)}" r="4"></circle>`).join("");
    const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => {
      const v = yMin + f * (yMax - yMin);
      return `<text x="${pad.l - 6}" y="${Y(v) + 3}" text-anchor="end">${v.toFixed(2)}</text>
              <line class="gridline" x1="${pad.l}" x2="${width - pad.r}" y1="${Y(v)}" y2="${Y(v)}"></line>`;
    }).join("");
    const xt = [0, 0.5, 1].map((f) => `<text x="${X(f * xMax)}" y="${height - pad.b + 14}" text-anchor="middle">${
      xKey === "cost" ? money(f * xMax) : Math.round(f * xMax)}</text>`).join("");
    return `<svg class="plot" viewBox="0 0 ${width} ${height}" width="100%" data-points="${points.length}">
      ${ticks}${xt}<path class="best" d="${path}"></path>${dots}
      <text x="${(width + pad.l) / 2}" y="${height - 4}" text-anchor="middle">${AXES[xKey]}</text>
      <text x="12" y="${height / 2}" transform="rotate(-90 12 ${height / 2})" text-anchor="middle">best dev</text></svg>`;
  }
  function bindPlot(root, points, run) {
    const tip = $(".plot-tip", root);
    root.querySelectorAll("circle.pt").forEach((c) => {
      const pt = points[Number(c.dataset.i)];
      c.addEventListener("mouseenter", () => {
        tip.innerHTML = `iteration ${pt.iteration}: ${badge(pt.decision)} best ${nodeLink(pt.best_id, run)} dev ${num(pt.best_dev)}
          · ${pt.rollouts} rollouts · ${money(pt.cost)}`;
      });
      c.addEventListener("click", () => { if (pt.best_id !== null) location.hash = href("node", pt.best_id, run); });
    });
  }
  function progressBlock(points, xKey, run, id) {
    const keys = ["accepted", "neutral", "rejected", "invalid", "no_patch"];
    const legendHtml = keys.map((k) => `<span><svg width="10" height="10"><circle class="pt b-${k}" cx="5" cy="5" r="4"></circle></svg> ${k}</span>`).join(" ");
    return `<div class="progress" id="${id}"><div class="legend plot">${legendHtml} <span>(other decisions grey); line: the best node the run had recorded</span></div>
      <div class="plot-tip tip">hover a point; click it for the best node then</div>
      ${progressSvg(points, xKey, 720, 300)}</div>`;
  }
  async function renderProgress() {
    const p = await api(state.run, "progress");
    const xKey = state.arg && AXES[state.arg] ? state.arg : "rollouts";
    const opts = Object.keys(AXES).map((k) => `<option value="${k}" ${k === xKey ? "selected" : ""}>${AXES[k]}</option>`).join("");
    $("#view").innerHTML = `<label>x axis <select id="x-axis">${opts}</select></label>
      ${progressBlock(p.points, xKey, state.run, "progress-main")}`;
    $("#x-axis").addEventListener("change", (e) => { location.hash = href("progress", e.target.value); });
    bindPlot($("#progress-main"), p.points, state.run);
  }

  // --- tasks --------------------------------------------------------------------------------------------------
  function ratio(x) { return x ? `${x.passes}/${x.runs}` : "–"; }
  async function renderTasks() {
    const t = await api(state.run, "tasks");
    const rows = t.tasks.map((x) => `<tr data-task="${esc(x.task_id)}"><td>${esc(x.split)}</td>
      <td><a href="${href("task", x.task_id)}">${esc(x.task_id)}</a></td><td>${esc(x.task_group)}</td>
      <td>${ratio(x.baseline)}</td><td>${ratio(x.best)}</td><td>${x.nodes}</td></tr>`).join("");
    $("#view").innerHTML = `<input id="task-filter" placeholder="filter tasks">
      <table class="grid" id="tasks"><thead><tr><th>split</th><th>task</th><th>group</th><th>baseline passes</th>
      <th>best passes</th><th>nodes run on</th></tr></thead><tbody>${rows}</tbody></table>`;
    $("#task-filter").addEventListener("input", (e) => {
      const q = e.target.value.toLowerCase();
      document.querySelectorAll("#tasks tbody tr").forEach((tr) => { tr.hidden = !tr.dataset.task.toLowerCase().includes(q); });
    });
  }

  // --- node page ----------------------------------------------------------------------------------------------
  function hypothesisHtml(h) {
    if (!h) return '<span class="muted">none (the baseline, or an evolution step)</span>';
    return "<dl>" + Object.entries(h).map(([k, v]) =>
      `<dt>${esc(k)}</dt><dd>${esc(typeof v === "string" ? v : JSON.stringify(v))}</dd>`).join("") + "</dl>";
  }
  function stepDiff(st) {  // report.html inlines each diff once: a step may point at its child's own diff
    return st.diff_of === undefined ? st.diff : STATIC.runs[state.run].views.nodes[String(st.diff_of)].diff;
  }
  function baselineDiffHtml(doc) {
    if (!doc) return '<span class="muted">this is the baseline</span>';
    return doc.segments.map((seg) => `<h4>${esc(seg.label)} (${seg.steps.length} edge(s))</h4>` + seg.steps.map((st) =>
      `<div class="step">edge ${st.edge_id}: ${nodeLink(st.parent_id)} → ${nodeLink(st.child_id)} ${esc(st.kind)}
       +${st.lines_added} −${st.lines_removed}</div><pre class="diff">${diffHtml(stepDiff(st))}</pre>`).join("")).join("");
  }
  async function renderNode(id) {
    const d = await api(state.run, "node", id);
    const n = d.node, e = d.edge_in;
    const tasks = d.tasks.map((t) => `<tr class="${t.passes === t.runs ? "pass" : t.passes === 0 ? "fail" : "mixed"}">
      <td>${esc(t.split)}</td><td><a href="${href("task", t.task_id)}">${esc(t.task_id)}</a></td>
      <td>${t.passes}/${t.runs}</td><td>${num(t.score)}</td><td class="reason" title="${esc(t.failure || "")}">${esc(t.failure || "")}</td></tr>`).join("");
    const lessons = d.lessons.map((l) => `<li>${badge(l.category)} ${esc(l.attribution)} ${l.task_id ? esc(l.task_id) + ": " : ""}${esc(l.text)}</li>`).join("");
    const sessions = d.sessions.map((s) => `<tr><td>${esc(s.role)}</td><td>${esc(s.backend)} ${esc(s.model)}</td>
      <td>${s.turns}</td><td>${s.tokens_in}/${s.tokens_out}</td><td>${money(s.cost_usd)}</td><td>${num(s.duration_s, 1)} s</td>
      <td>${esc(s.outcome)}</td><td>${esc(s.transcript_path || "–")}</td></tr>`).join("");
    const test = n.test_mean === null || n.test_mean === undefined ? "" : ` · test <b>${num(n.test_mean)}</b> ± ${num(n.test_std)}`;
    $("#view").innerHTML = `<article id="node-page" data-node="${n.id}">
      <h2>Node #${n.id} ${badge(n.status)} ${d.is_best ? '<span class="badge b-best">best</span>' : ""}</h2>
      <p>iteration ${n.iteration} · phase ${esc(n.phase)} · ${esc(n.patch_kind)} · origin ${esc(n.origin)} ·
        commit <code>${esc(n.commit.slice(0, 10))}</code> · dev <b>${num(n.dev_mean)}</b> ± ${num(n.dev_std)}${test}
        · batch ${num(n.batch_before)} → ${num(n.batch_after)}</p>
      <p>parent ${nodeLink(n.parent_id)} ${e ? `via ${badge(e.kind)} +${e.lines_added} −${e.lines_removed} in ${e.files_changed.length} file(s)` : ""}
        · children ${d.children.map((c) => nodeLink(c)).join(" ") || "none"}</p>
      <p class="reason-full">${esc(n.status_reason)}</p>
      <h3>Hypothesis</h3>${hypothesisHtml(n.hypothesis)}
      <h3>Diff against its parent</h3><pre class="diff" id="node-diff">${diffHtml(d.diff)}</pre>
      <details><summary>Diffs from the baseline</summary>${baselineDiffHtml(d.baseline_diff)}</details>
      <h3>Per-task outcomes</h3><table class="grid"><thead><tr><th>split</th><th>task</th><th>passes</th><th>score</th>
        <th>first failure</th></tr></thead><tbody>${tasks}</tbody></table>
      <h3>Lessons</h3><ul>${lessons || '<li class="muted">none</li>'}</ul>
      <h3>Sessions of iteration ${n.iteration}</h3><table class="grid"><thead><tr><th>role</th><th>backend</th>
        <th>turns</th><th>tokens in/out</th><th>cost</th><th>time</th><th>outcome</th><th>transcript</th></tr></thead>
        <tbody>${sessions || '<tr><td colspan="8" class="muted">none</td></tr>'}</tbody></table></article>`;
  }

  // --- task page ----------------------------------------------------------------------------------------------
  async function renderTask(id) {
    const t = await api(state.run, "task", id);
    const nodes = t.nodes.map((n) => `<tr class="${n.passes === n.runs ? "pass" : n.passes === 0 ? "fail" : "mixed"}">
      <td>${nodeLink(n.node_id)}</td><td>${badge(n.status)}</td><td>${n.iteration}</td><td>${n.passes}/${n.runs}</td>
      <td>${[...new Set(n.outcomes.map((o) => o.split))].join(", ")}</td></tr>`).join("");
    const causes = t.root_causes.map((c) => `<li>${esc(c.text)} <span class="muted">(${c.categories.join(", ")}; ×${c.count})</span></li>`).join("");
    const sigs = t.failure_signatures.map((s) => `<li><code>${esc(s.signature)}</code> ×${s.count} on ${s.nodes.map((x) => nodeLink(x)).join(" ")}</li>`).join("");
    const attempts = t.attempts.map((a) => `<tr><td>${a.iteration}</td><td>${nodeLink(a.parent_id)} → ${nodeLink(a.child_id)}</td>
      <td>${esc(a.kind)}</td><td>${badge(a.transition)}</td><td>${badge(a.status)}</td><td class="reason" title="${esc(a.reason)}">${esc(a.reason)}</td>
      <td class="reason" title="${esc(a.plan)}">${esc(a.plan)}</td></tr>`).join("");
    const files = t.sensitive_files.map((f) => `<li><code>${esc(f.file)}</code> fixed ${f.fixed}, regressed ${f.regressed}</li>`).join("");
    $("#view").innerHTML = `<article id="task-page"><h2>Task ${esc(t.task_id)}</h2><p>group ${esc(t.task_group || "–")}</p>
      <h3>Outcome on every node</h3><table class="grid"><thead><tr><th>node</th><th>status</th><th>iteration</th>
        <th>passes</th><th>splits</th></tr></thead><tbody>${nodes}</tbody></table>
      <h3>Root causes</h3><ul>${causes || '<li class="muted">none recorded</li>'}</ul>
      <h3>Failure signatures</h3><ul>${sigs || '<li class="muted">none</li>'}</ul>
      <h3>Attempted fixes</h3><table class="grid"><thead><tr><th>iteration</th><th>edge</th><th>kind</th><th>transition</th>
        <th>status</th><th>reason</th><th>plan</th></tr></thead><tbody>${attempts}</tbody></table>
      <h3>Files it is sensitive to</h3><ul>${files || '<li class="muted">none</li>'}</ul></article>`;
  }

  // --- two runs side by side ----------------------------------------------------------------------------------
  async function renderCompare() {
    const pick = state.compare;
    const opts = (sel) => state.runs.map((r) => `<option value="${r.index}" ${r.index === sel ? "selected" : ""}>${esc(r.label)}</option>`).join("");
    const cols = await Promise.all(pick.map(async (run, side) => {
      const [s, g, p] = await Promise.all([api(run, "summary"), api(run, "graph"), api(run, "progress")]);
      const decisions = {};
      p.points.forEach((pt) => { decisions[pt.decision] = (decisions[pt.decision] || 0) + 1; });
      return { run, side, s, g, p, decisions };
    }));
    $("#view").innerHTML = `<div class="compare">${cols.map((c) => `<div class="col" data-run="${c.run}">
      <select class="compare-pick" data-side="${c.side}">${opts(c.run)}</select>
      <table class="grid"><tbody>
        <tr><td>status</td><td>${badge(c.s.run.status)}</td></tr>
        <tr><td>best</td><td>${nodeLink(c.s.best && c.s.best.id, c.run)} dev ${num(c.s.best && c.s.best.dev_mean)}</td></tr>
        <tr><td>baseline dev</td><td>${num(c.s.baseline && c.s.baseline.dev_mean)}</td></tr>
        <tr><td>iterations</td><td>${c.p.points.length} (${Object.entries(c.decisions).map(([k, v]) => `${k} ${v}`).join(", ")})</td></tr>
        <tr><td>rollouts</td><td>${c.s.rollouts.count} (${money(c.s.rollouts.cost)})</td></tr>
        <tr><td>sessions</td><td>${c.s.sessions.count} (${money(c.s.sessions.cost)})</td></tr></tbody></table>
      ${progressBlock(c.p.points, "rollouts", c.run, "progress-" + c.side)}<div class="cy-small" id="cy-${c.side}"></div></div>`).join("")}</div>`;
    cols.forEach((c) => {
      drawGraph($("#cy-" + c.side), c.g, c.run);
      bindPlot($("#progress-" + c.side), c.p.points, c.run);
    });
    document.querySelectorAll(".compare-pick").forEach((sel) => sel.addEventListener("change", (e) => {
      state.compare[Number(e.target.dataset.side)] = Number(e.target.value);
      renderCompare().catch(showError);
    }));
  }

  // --- routing and following a live run -----------------------------------------------------------------------
  const RENDER = { graph: renderGraph, timeline: renderTimeline, progress: renderProgress, tasks: renderTasks,
    node: () => renderNode(state.arg), task: () => renderTask(state.arg), compare: renderCompare };
  function showError(err) { $("#view").innerHTML = `<p class="error">${esc(err.message || err)}</p>`; }
  function parseHash() {
    const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
    const run = Number(parts[0]);
    state.run = Number.isInteger(run) && run >= 0 && run < state.runs.length ? run : 0;
    state.view = RENDER[parts[1]] ? parts[1] : "graph";
    state.arg = parts.length > 2 ? parts.slice(2).join("/") : null;
  }
  async function render(refresh) {
    document.querySelectorAll("#tabs a").forEach((a) => {
      a.href = href(a.dataset.view);
      a.classList.toggle("active", a.dataset.view === state.view);
    });
    $("#run-select").value = String(state.run);
    if (!refresh && state.view !== "graph") state.cy = null;
    await Promise.all([renderSummary(), RENDER[state.view](refresh)]);
    document.body.dataset.ready = "1";
  }
  function inFlight(s) {
    if (!s) return "";
    const eta = s.search_eta_s === null ? "?" : new Date(s.search_eta_s * 1000).toISOString().substring(11, 19);
    const flying = s.in_flight.length ? s.in_flight.join(", ") : "none";
    return ` · in flight: iterations ${flying} · sandboxes ${s.busy}/${s.sandboxes} busy, ${s.queued} queued · search ETA ${eta}`;
  }
  async function poll() {
    if (state.polling) return;  // the previous poll is still redrawing (a large graph on a busy machine)
    state.polling = true;
    try {
      const h = await api(state.run, "head");
      const live = $("#live");
      live.textContent = h.status === "running" ? `following the run (event ${h.last_event_id})${inFlight(h.schedule)}` : h.status;
      live.className = h.status === "running" ? "on" : "";
      if (state.lastEvent !== null && h.last_event_id !== state.lastEvent && !["node", "task"].includes(state.view)) {
        await render(true);
      }
      state.lastEvent = h.last_event_id;
    } catch (err) {
      $("#live").textContent = "cannot reach the server";
    } finally {
      state.polling = false;
    }
  }
  async function main() {
    state.runs = await runList();
    $("#run-select").innerHTML = state.runs.map((r) => `<option value="${r.index}">${esc(r.label)}</option>`).join("");
    $("#run-select").addEventListener("change", (e) => { state.lastEvent = null; location.hash = href(state.view === "node" || state.view === "task" ? "graph" : state.view, undefined, Number(e.target.value)); });
    if (state.runs.length < 2) $("#tab-compare").hidden = true;
    window.addEventListener("hashchange", () => { parseHash(); render(false).catch(showError); });
    parseHash();
    await render(false).catch(showError);
    if (STATIC) {
      $("#live").textContent = "report (" + (STATIC.runs[0].meta.status || "") + ")";
    } else {
      await poll();
      setInterval(poll, POLL_MS);
    }
  }
  window.saddlerUI = { state, STATIC: !!STATIC };
  main().catch(showError);
})();
