// The attention lab's drawings, free of the page around them: each draws one view's numbers (the
// JSON of /api/lab/*) into a host element. The served lab (lab.js) calls them with its state and
// its requests; a notebook's view (nmt.api.views) with the numbers inline, offline: drawView.
"use strict";

function fmt(x, digits = 3) {
  return x === null || x === undefined ? "—" : Number(x).toFixed(digits);
}

function element(tag, attrs = {}, text) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") el.className = v; else el.setAttribute(k, v);
  }
  if (text !== undefined) el.textContent = text;
  return el;
}

// A subword as a label: without SentencePiece's word marker; one that begins with a combining mark
// (a vowel sign or virama cut from its consonant) on a dotted circle, as scripts' charts show one,
// never a missing-glyph box.
function clean(token) {
  const text = token.split("\u2581").join("");
  return /^\p{M}/u.test(text) ? `\u25CC${text}` : text;
}

// A bar row over the source subwords: values in [0, 1] as coloured bars with their numbers.
function barRow(svg, y, labels, values, caption, options = {}) {
  const width = 46, left = 150, height = 60;
  add(svg, "text", { x: left - 8, y: y + height / 2, "text-anchor": "end", class: "caption" }, caption);
  values.forEach((value, j) => {
    const x = left + j * width;
    const h = Math.max(1, height * Math.min(1, Math.abs(value) / (options.scale || 1)));
    const bar = add(svg, "rect", {
      x: x + 4, y: y + height - h, width: width - 8, height: h, class: options.cls || "bar",
      fill: options.fill ? options.fill(value) : colour(value / (options.scale || 1)), "data-value": value, "data-col": j,
    });
    add(bar, "title", {}, `${labels[j]}: ${fmt(value, 4)}`);
    add(svg, "text", { x: x + width / 2, y: y + height + 12, "text-anchor": "middle", class: "tick" }, fmt(value, 2));
  });
  return left + values.length * width;
}

function sourceLabels(svg, y, labels, marks = {}) {
  const width = 46, left = 150;
  labels.forEach((label, j) => {
    const x = left + j * width + width / 2;
    add(svg, "text", { x, y, "text-anchor": "end", transform: `rotate(-40 ${x} ${y})`,
      class: marks[j] ? `src ${marks[j]}` : "src", "data-col": j }, clean(label) || label);
  });
}

// ---- beam tree ----

function treeLayout(nodes) {
  const children = nodes.map(() => []);
  nodes.forEach((n) => { if (n.parent !== null) children[n.parent].push(n.id); });
  children.forEach((list) => list.sort((a, b) => nodes[b].log_prob_sum - nodes[a].log_prob_sum));
  const y = new Array(nodes.length).fill(0);
  let leaf = 0;
  const place = (id) => {
    if (!children[id].length) { y[id] = leaf++; return y[id]; }
    const ys = children[id].map(place);
    y[id] = (ys[0] + ys[ys.length - 1]) / 2;
    return y[id];
  };
  place(0);
  return { y, leaves: leaf };
}

// Zoom to fit at first sight; the wheel zooms about the pointer, dragging pans, a double click
// (or the Fit button) fits again. It all moves the viewBox: the figure stays one SVG to export.
function panZoom(svg, full) {
  let box = [...full];
  const apply = () => svg.setAttribute("viewBox", box.map((v) => v.toFixed(1)).join(" "));
  const toBox = (event) => {
    const rect = svg.getBoundingClientRect();
    const scale = Math.max(box[2] / rect.width, box[3] / rect.height);  // "meet": the larger ratio applies
    return [box[0] + (event.clientX - rect.left) * scale, box[1] + (event.clientY - rect.top) * scale, scale];
  };
  const zoom = (factor, at) => {
    const [px, py] = at || [box[0] + box[2] / 2, box[1] + box[3] / 2];
    const width = Math.min(full[2] * 4, Math.max(40, box[2] * factor));
    const height = (width / box[2]) * box[3];
    box = [px - ((px - box[0]) * width) / box[2], py - ((py - box[1]) * height) / box[3], width, height];
    apply();
  };
  svg.addEventListener("wheel", (event) => {
    event.preventDefault();
    const [x, y] = toBox(event);
    zoom(event.deltaY > 0 ? 1.2 : 1 / 1.2, [x, y]);
  }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", (event) => { drag = [event.clientX, event.clientY]; });
  svg.addEventListener("pointermove", (event) => {
    if (!drag) return;
    const scale = toBox(event)[2];
    box[0] -= (event.clientX - drag[0]) * scale;
    box[1] -= (event.clientY - drag[1]) * scale;
    drag = [event.clientX, event.clientY];
    apply();
  });
  ["pointerup", "pointerleave"].forEach((name) => svg.addEventListener(name, () => { drag = null; }));
  const fit = () => { box = [...full]; apply(); };
  svg.addEventListener("dblclick", fit);
  apply();
  return { fit, zoom };
}

function nodeLabel(n) {
  return (n.rank ? `#${n.rank} ` : "") + (clean(n.token) || n.token);
}

// options.onContinue(prefix): a node's "Continue decoding from here" (the served page's; none offline)
async function drawTree(host, data, options = {}) {
  const nodes = data.nodes;
  await fontsFor(nodes.map((n) => n.token));
  const { y, leaves } = treeLayout(nodes);
  const steps = Math.max(...nodes.map((n) => n.step));
  // each label sits beside its node, and the next step starts after the longest label
  const labelWidth = Math.max(...nodes.map((n) => nodeLabel(n).length)) * 7.5;
  const dx = Math.max(48, labelWidth + 22), dy = 24, left = 14, top = 16;
  const width = left + dx * steps + labelWidth + 24, height = top + dy * Math.max(leaves - 1, 0) + 20;
  const svg = svgElement(width, height);
  svg.classList.add("tree-figure");
  svg.setAttribute("preserveAspectRatio", "xMidYMin meet");
  svg.setAttribute("width", "100%");
  svg.removeAttribute("height");  // CSS: as tall as the width allows, at most most of the window
  svg.dataset.width = String(width);  // its own size, for export
  svg.dataset.height = String(height);
  const pos = (n) => [left + dx * n.step, top + dy * y[n.id]];
  for (const n of nodes) {
    if (n.parent === null) continue;
    const [x1, y1] = pos(nodes[n.parent]), [x2, y2] = pos(n);
    add(svg, "path", { d: `M${x1},${y1} C${x1 + dx / 2},${y1} ${x2 - dx / 2},${y2} ${x2},${y2}`, class: `edge ${n.status}` });
  }
  for (const n of nodes) {
    const [x, yy] = pos(n);
    const group = add(svg, "g", { class: `node ${n.status}${n.rank ? " ranked" : ""}`, "data-id": n.id, tabindex: "0" });
    add(group, "circle", { cx: x, cy: yy, r: n.rank ? 7 : 5 });
    add(group, "text", { x: x + 9, y: yy + 4, class: "token" }, nodeLabel(n));
    add(group, "title", {}, `${n.token}  log p ${fmt(n.logprob)}  Σ ${fmt(n.log_prob_sum)}  ${n.status}`);
    group.addEventListener("click", () => showNode(host, n, nodes, data, options));
    group.addEventListener("keydown", (event) => { if (event.key === "Enter") showNode(host, n, nodes, data, options); });
  }
  const counts = { kept: 0, ended: 0, pruned: 0 };
  nodes.forEach((n) => { if (n.status in counts) counts[n.status] += 1; });
  const summary = element("p", { class: "tree-summary" },
    `${nodes.length} nodes: ${counts.kept} kept, ${counts.ended} ended, ${counts.pruned} pruned; ` +
    `#1…#${nodes.filter((n) => n.rank).length} are the n-best search returned (beam ${data.beam_size}). ` +
    "Scroll to zoom, drag to pan, double-click to fit.");
  const frame = element("div", { class: "tree-frame" });
  frame.appendChild(svg);
  const view = panZoom(svg, [0, 0, width, height]);
  const controls = element("div", { class: "tree-controls" });
  [["Fit", () => view.fit()], ["+", () => view.zoom(1 / 1.5)], ["−", () => view.zoom(1.5)]].forEach(([label, act]) => {
    const button = element("button", { type: "button" }, label);
    button.addEventListener("click", act);
    controls.appendChild(button);
  });
  host.replaceChildren(summary, controls, frame, element("div", { class: "node-detail" }, "Click a node: its attention row, and decoding continued from it."));
  return svg;
}

function pathTo(node, nodes) {
  const tokens = [];
  for (let n = node; n.parent !== null; n = nodes[n.parent]) tokens.unshift(n.token);
  return tokens;
}

function showNode(host, node, nodes, data, options) {
  const detail = host.querySelector(".node-detail");
  detail.replaceChildren();
  const path = pathTo(node, nodes);
  detail.appendChild(element("p", {}, `${path.map(clean).join(" ") || "<bos>"} — step ${node.step}, ` +
    `log p ${fmt(node.logprob)}, path ${fmt(node.log_prob_sum)}, ${node.status}` + (node.rank ? `, #${node.rank} (score ${fmt(node.score)})` : "")));
  if (node.attention.length) {
    const svg = svgElement(150 + 46 * node.attention.length + 20, 150);
    sourceLabels(svg, 40, data.source_tokens);
    barRow(svg, 55, data.source_tokens, node.attention, "attention");
    detail.appendChild(svg);
  }
  const prefix = path.filter((t) => t !== "<eos>");
  if (prefix.length && options.onContinue) {
    const button = element("button", { type: "button", class: "continue" }, "Continue decoding from here");
    button.addEventListener("click", () => options.onContinue(prefix));
    detail.appendChild(button);
  }
}

// ---- step-by-step playback ----

// The step `at` (0-based) of a playback, into the host playbackControls made.
function drawPlaybackStep(host, data, at) {
  const step = data.steps[at];
  const n = data.steps.length;
  const svg = svgElement(150 + 46 * data.source_tokens.length + 40, 240);
  svg.classList.add("playback-figure");
  const marks = {};
  if (step.window) for (let j = step.window[0]; j <= step.window[1]; j++) marks[j] = "in-window";
  if (step.chosen !== null && step.chosen !== undefined) marks[step.chosen] = "chosen";
  sourceLabels(svg, 40, data.source_tokens, marks);
  const energies = step.energies || (data.layer !== null && data.layer !== undefined ? step.scores : null) || [];
  const finite = energies.filter((e) => e !== null && Number.isFinite(e));
  if (finite.length) {
    const span = Math.max(...finite.map(Math.abs), 1e-9);
    barRow(svg, 62, data.source_tokens, energies.map((e) => (e === null ? 0 : e)), "scores e_j",
      { scale: span, cls: "bar energy", fill: (v) => (v >= 0 ? "#2c728e" : "#b3261e") });
  }
  barRow(svg, 155, data.source_tokens, step.weights, "weights a_j", { cls: "bar weight" });
  const details = element("div", { class: "pb-details" });
  details.appendChild(element("p", { class: "pb-step" }, `step ${at + 1} / ${n}: emits ${step.token} (p = ${fmt(step.probability)})`));
  const formula = element("ul", { class: "formula" });
  formula.appendChild(element("li", {}, `q = ${data.query_is}: ${step.query.length} numbers, |q| = ${fmt(norm(step.query))}`));
  if (data.keys) formula.appendChild(element("li", {}, `k_j = W^K m_j, head ${data.head}'s share: ${data.keys[0].length} numbers for each source position`));
  data.formula.forEach((line) => formula.appendChild(element("li", {}, line)));
  if (step.centre !== null && step.centre !== undefined) {
    formula.appendChild(element("li", {}, `here p_t = ${fmt(step.centre, 2)}, window [${step.window[0]}, ${step.window[1]}]`));
  }
  if (step.chosen !== null && step.chosen !== undefined) formula.appendChild(element("li", {}, `here argmax = ${step.chosen} (${data.source_tokens[step.chosen]})`));
  formula.appendChild(element("li", { class: "context" }, `c: ${step.context.length} numbers, |c| = ${fmt(norm(step.context))}`));
  details.appendChild(formula);
  details.appendChild(element("p", { class: "caption" }, "q, then c, value by value:"));
  details.appendChild(sparkline(step.query));
  details.appendChild(sparkline(step.context));
  const table = element("table", { class: "pb-table" });
  const head = element("tr");
  const dotProduct = !step.energies && data.keys;  // a Transformer's head: the scores are the softmax's input
  (dotProduct ? ["source j", "q · k_j / √d", "a_j"] : ["source j", "e_j", "softmax input", "a_j"])
    .forEach((h) => head.appendChild(element("th", {}, h)));
  table.appendChild(head);
  data.source_tokens.forEach((token, j) => {
    const row = element("tr", { "data-col": j });
    row.appendChild(element("td", {}, token));
    if (!dotProduct) row.appendChild(element("td", {}, fmt(step.energies ? step.energies[j] : null)));
    row.appendChild(element("td", {}, step.scores ? (step.scores[j] === null ? "masked" : fmt(step.scores[j])) : "—"));
    row.appendChild(element("td", { class: "weight", "data-weight": step.weights[j] }, fmt(step.weights[j], 4)));
    table.appendChild(row);
  });
  details.appendChild(table);
  const top = element("ol", { class: "pb-top" });
  step.top.forEach((t) => top.appendChild(element("li", { class: t.token === step.token ? "taken" : "" }, `${t.token}  ${fmt(t.probability)}`)));
  details.appendChild(element("p", {}, "most probable next subwords:"));
  details.appendChild(top);
  const figure = element("div", { class: "scroller" });
  figure.appendChild(svg);
  host.querySelector(".pb-body").replaceChildren(figure, details);
  host.querySelector(".pb-slider").value = at;
  host.dataset.step = String(at);
  return svg;
}

function norm(values) {
  return Math.sqrt(values.reduce((s, v) => s + v * v, 0));
}

function sparkline(values) {
  const width = Math.min(600, 3 * values.length), height = 40;
  const svg = svgElement(width, height);
  svg.classList.add("sparkline");
  const max = Math.max(...values.map(Math.abs), 1e-9);
  values.forEach((v, i) => {
    const h = (Math.abs(v) / max) * (height / 2);
    add(svg, "rect", { x: (i * width) / values.length, y: v >= 0 ? height / 2 - h : height / 2,
      width: Math.max(1, width / values.length - 0.5), height: Math.max(0.5, h), fill: v >= 0 ? "#2c728e" : "#b3261e" });
  });
  return svg;
}

// Previous / next / a slider over the steps, from step options.step (default 0); options.onStep(t)
// hears each move, options.onHead(name, value) a Transformer's layer or head chosen (the served
// page decodes again; offline there are no pickers: the numbers are those of one head).
function playbackControls(host, data, options = {}) {
  const bar = element("div", { class: "pb-controls" });
  const prev = element("button", { type: "button", class: "pb-prev" }, "◀ previous");
  const next = element("button", { type: "button", class: "pb-next" }, "next ▶");
  const slider = element("input", { type: "range", class: "pb-slider", min: 0, max: data.steps.length - 1, value: 0 });
  let at = Math.max(0, Math.min(data.steps.length - 1, options.step || 0));
  const go = (t) => {
    at = Math.max(0, Math.min(data.steps.length - 1, t));
    drawPlaybackStep(host, data, at);
    if (options.onStep) options.onStep(at);
  };
  prev.addEventListener("click", () => go(at - 1));
  next.addEventListener("click", () => go(at + 1));
  slider.addEventListener("input", () => go(Number(slider.value)));
  bar.append(prev, slider, next);
  if (data.layer !== null && data.layer !== undefined && options.onHead) bar.append(...headPickers(data, options.onHead));
  host.replaceChildren(bar, element("div", { class: "pb-body" }));
  drawPlaybackStep(host, data, at);
}

// A Transformer's playback plays one decoder layer's head: pick which.
function headPickers(data, onHead) {
  const picker = (name, count, value, label) => {
    const select = element("select", { class: `pb-${name}`, "aria-label": name });
    for (let i = 0; i < count; i++) select.appendChild(element("option", { value: i }, `${label} ${i}`));
    select.value = value;
    select.addEventListener("change", () => onHead(name, Number(select.value)));
    return select;
  };
  return [picker("layer", data.layers, data.layer, "layer"), picker("head", data.heads, data.head, "head")];
}

// Word alignment: the word attention with the model's links (●) and the reference aligner's (○).
async function drawAlignment(host, data) {
  const holder = element("div");
  const figure = await drawHeatmap(holder, data.target_words, data.source_words, data.weights,
    { title: "word attention with the model's links and the reference's" });
  const cell = 28, left = 130, top = 90;
  const mark = (pairs, kind) => pairs.forEach(([i, j]) => {
    const circle = add(figure, "circle", { cx: left + i * cell + cell / 2 - 0.5, cy: top + j * cell + cell / 2 - 0.5,
      r: kind === "model" ? 5 : 9, class: `link ${kind}`, "data-source": i, "data-target": j });
    add(circle, "title", {}, `${kind === "model" ? "the attention's link" : "eflomal's link"}: ` +
      `${data.target_words[j]} ← ${data.source_words[i]}`);
  });
  mark(data.links, "model");
  if (data.reference) mark(data.reference, "reference");
  figure.classList.add("align-figure");
  const summary = data.agreement
    ? `AER ${fmt(data.agreement.aer, 2)} against eflomal (precision ${fmt(data.agreement.precision, 2)}, ` +
      `recall ${fmt(data.agreement.recall, 2)}): ● the attention's links, ○ the aligner's, a match is ● inside ○. ` +
      "eflomal aligned this same translation, so the AER says whether the attention points where a word " +
      "aligner would, not whether the translation is right (0 on a wrong one too)."
    : `● the attention's links. ${data.note}.`;
  const parts = [element("p", { class: "align-summary" }, summary), holder];
  if (data.heads) parts.push(headAgreement(data.heads));
  (host.querySelector(".align-body") || host).replaceChildren(...parts);
}

function headAgreement(heads) {
  const best = Math.min(...heads.flat());
  const table = element("table", { class: "align-heads" });
  const header = element("tr", {}, "");
  header.appendChild(element("th", {}, "AER by head"));
  heads[0].forEach((_, h) => header.appendChild(element("th", {}, `head ${h}`)));
  table.appendChild(header);
  heads.forEach((row, layer) => {
    const tr = element("tr");
    tr.appendChild(element("th", {}, `layer ${layer}`));
    row.forEach((aer) => tr.appendChild(element("td", { class: aer === best ? "best" : "" }, fmt(aer, 2))));
    table.appendChild(tr);
  });
  return table;
}

// ---- attention over training ----

function agreementChart(entries, at) {
  const width = 420, height = 150, left = 46, right = 12, top = 24, bottom = 30;
  const svg = svgElement(width, height);
  svg.classList.add("tl-agreement");
  const points = entries.map((e, i) => [i, e.alignment ? e.alignment.aer : null]).filter(([, v]) => v !== null);
  const x = (i) => left + (entries.length > 1 ? (i * (width - left - right)) / (entries.length - 1) : 0);
  const y = (v) => top + v * (height - top - bottom);  // AER 0 at the top: better is higher
  add(svg, "text", { x: left, y: 14, class: "tl-agreement-title" },
    `AER against eflomal by validation (${entries.find((e) => e.alignment).alignment.pairs} dev pairs; lower is better)`);
  [0, 0.5, 1].forEach((v) => {
    add(svg, "line", { x1: left, x2: width - right, y1: y(v), y2: y(v), stroke: "#ccc" });
    add(svg, "text", { x: left - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 10 }, fmt(v, 1));
  });
  add(svg, "polyline", { points: points.map(([i, v]) => `${x(i)},${y(v)}`).join(" "), fill: "none", stroke: "#2c728e", "stroke-width": 2 });
  points.forEach(([i, v]) => {
    const dot = add(svg, "circle", { cx: x(i), cy: y(v), r: i === at ? 5 : 3, fill: i === at ? "#b3261e" : "#2c728e", class: "tl-aer", "data-aer": v });
    add(dot, "title", {}, `epoch ${entries[i].epoch}: AER ${fmt(v, 3)}`);
  });
  add(svg, "text", { x: (left + width - right) / 2, y: height - 8, "text-anchor": "middle", "font-size": 10 }, "validation");
  return svg;
}

// One validation of the timeline (state: at, probe, head "layer.head" or "" for the last layer's mean).
async function drawTimeline(host, timeline, state, options) {
  const entries = timeline.entries;
  const entry = entries[state.at];
  const chart = host.querySelector(".tl-chart");
  if (entries.some((e) => e.alignment)) chart.replaceChildren(agreementChart(entries, state.at));
  const aer = entry.alignment ? `, AER ${fmt(entry.alignment.aer, 3)} against eflomal` : "";
  const probe = entry.probes[state.probe];
  if (!probe) {  // train.probes 0: the agreement alone
    host.querySelector(".tl-label").textContent = `validation ${state.at + 1} / ${entries.length}: epoch ${entry.epoch}${aer}`;
    return null;
  }
  host.querySelector(".tl-label").textContent =
    `validation ${state.at + 1} / ${entries.length}: epoch ${entry.epoch}, step ${entry.step}, dev BLEU ${fmt(entry.dev_bleu, 2)}${aer} — “${probe.translation}”`;
  const rows = probe.tokens, cols = probe.source_tokens;
  // a Transformer's timeline holds every head: the picker's "layer.head", or the last layer's mean
  const [layer, head] = (state.head || "").split(".").map(Number);
  const chosen = probe.heads && state.head ? probe.heads[layer][head] : probe.attention;
  const cells = chosen.length ? chosen : rows.map(() => cols.map(() => 0));
  return drawHeatmap(host.querySelector(".tl-body"), rows, cols, cells, { rowScaled: options.rowScaled ? options.rowScaled() : false });
}

// The timeline (/api/timeline's numbers): a slider over the validations, a probe sentence to follow
// and, for a Transformer, one head; options.rowScaled() says whether each row is scaled to its maximum.
async function timelineControls(host, timeline, options = {}) {
  const entries = timeline.entries;
  const state = { at: entries.length - 1, probe: 0, head: "" };
  const draw = () => drawTimeline(host, timeline, state, options);
  const slider = element("input", { type: "range", id: "timeline-slider", min: 0, max: entries.length - 1, value: entries.length - 1 });
  const probes = element("select", { class: "tl-probe" });
  const text = (tokens) => tokens.filter((t) => t !== "<eos>").join("").split("\u2581").join(" ").trim();
  entries[0].probes.forEach((p, i) => probes.appendChild(element("option", { value: i }, text(p.source_tokens))));
  slider.addEventListener("input", () => { state.at = Number(slider.value); draw(); });
  probes.addEventListener("change", () => { state.probe = Number(probes.value); draw(); });
  const bar = element("div", { class: "tl-controls" });
  bar.append(element("span", {}, "probe "), probes, element("span", {}, " validation "), slider);
  const heads = entries[0].probes.length ? entries[0].probes[0].heads : null;
  if (heads) {  // a Transformer: follow one head of one layer as it forms over the epochs
    const picker = element("select", { class: "tl-head", "aria-label": "which head" });
    picker.appendChild(element("option", { value: "" }, "all heads of the last layer (mean)"));
    heads.forEach((layer, l) => layer.forEach((_, h) => picker.appendChild(element("option", { value: `${l}.${h}` }, `layer ${l}, head ${h}`))));
    picker.addEventListener("change", () => { state.head = picker.value; draw(); });
    bar.append(element("span", {}, " attention "), picker);
  }
  host.replaceChildren(bar, element("p", { class: "tl-label" }), element("div", { class: "tl-chart" }),
    element("div", { class: "tl-body" }));
  await draw();
}

// ---- attentions compared on one's own pairs (nmt compare) ----

// A row per variant: BLEU, chrF and AER against eflomal as bars (the best marked); a Transformer's
// AER per layer and head as a small grid, darker where it aligns better.
function drawVariants(host, data) {
  const rows = data.variants;
  const best = { bleu: Math.max(...rows.map((r) => r.bleu)), chrf: Math.max(...rows.map((r) => r.chrf)),
    aer: Math.min(...rows.map((r) => r.aer)) };
  const table = element("table", { class: "variants" });
  const header = element("tr");
  ["variant", "BLEU", "chrF", "AER (lower is better)"].forEach((h) => header.appendChild(element("th", {}, h)));
  table.appendChild(header);
  for (const r of rows) {
    const tr = element("tr", { "data-variant": r.name });
    tr.appendChild(element("th", {}, r.name));
    [["bleu", 100], ["chrf", 100], ["aer", 1]].forEach(([key, top]) => {
      const cell = element("td", { class: best[key] === r[key] ? "best" : "", "data-value": r[key] });
      const bar = element("span", { class: "bar", style: `width: ${Math.round((80 * r[key]) / top)}px` });
      cell.append(bar, ` ${fmt(r[key], key === "aer" ? 3 : 2)}`);
      cell.title = `${r.name}: ${key} ${fmt(r[key], 4)}`;
      tr.appendChild(cell);
    });
    table.appendChild(tr);
  }
  host.append(table);
  for (const r of rows.filter((v) => v.heads)) {
    host.append(element("p", { class: "view-caption" }, `${r.name}: AER of each head alone (rows: layers)`));
    const figure = element("div");
    host.append(figure);
    const labels = (n, name) => Array.from({ length: n }, (_, i) => `${name} ${i}`);
    drawHeatmap(figure, labels(r.heads.length, "layer"), labels(r.heads[0].length, "head"),
      r.heads.map((layer) => layer.map((aer) => 1 - aer)), { title: "1 - AER of each head: arrow keys move between cells" });
  }
  host.append(element("p", { class: "view-caption" }, `${data.minutes} minutes shared; the best of each column marked`));
  return table;
}

// ---- a view by its kind, as a notebook draws it (nmt/api/views.py) ----

// One model's attention over a translation (nmt's Model.attention), captioned.
function drawAttention(host, data, caption) {
  const figure = element("div");
  host.append(element("p", { class: "view-caption" }, caption), figure);
  const label = (token) => clean(token) || token;
  return drawHeatmap(figure, data.tokens.map(label), data.source_tokens.map(label), data.weights,
    { title: "attention weights: arrow keys move between cells" });
}

async function drawView(kind, host, data) {
  host.replaceChildren();
  if (kind === "attention") return drawAttention(host, data, `${data.source} → ${data.translation}`);
  if (kind === "compare") {  // several models side by side, each its own heatmap
    host.append(element("p", { class: "view-caption" }, data.source));
    const row = element("div", { class: "compare-row" });
    host.append(row);
    return Promise.all(data.models.map((entry) => {
      const column = element("div", { class: "compare-model", "data-model": entry.name });
      row.append(column);
      return drawAttention(column, entry, `${entry.name}: ${entry.translation}`);
    }));
  }
  if (kind === "tree") return drawTree(host, data);
  if (kind === "playback") return playbackControls(host, data);
  if (kind === "heads") return window.headsView.controls(host, data);
  if (kind === "align") return drawAlignment(host, data);
  if (kind === "timeline") return timelineControls(host, data);
  if (kind === "variants") return drawVariants(host, data);
  host.append(element("pre", {}, JSON.stringify(data, null, 1)));  // a view drawn by the served page only
  return null;
}
