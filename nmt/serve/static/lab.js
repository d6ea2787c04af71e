// The attention lab: the sentence typed above taken apart by one model — its beam-search
// tree, each decoding step with the real numbers, attention edited by hand, attention beside
// saliency, and attention forming over training. Each view draws from /api/lab/* or
// /api/timeline and exports its figure (SVG, PNG) and data (JSON).
"use strict";

const lab = { model: null, text: "", result: null, view: "tree", data: {}, step: 0,
  models: {}, layer: -1, head: 0 };  // layer, head: a Transformer's playback (-1: the last layer)
const labEl = (id) => document.getElementById(id);

async function labApi(path, body) {
  const response = await fetch(path, body === undefined ? { headers: apiHeaders(false) } : {
    method: "POST", headers: apiHeaders(true), body: JSON.stringify(body),
  });
  const data = await response.json();
  if (!response.ok) throw new Error(`${data.field ? data.field + ": " : ""}${data.error}`);
  return data;
}

function viewHost(view) {
  return labEl(`lab-${view}`);
}

function hint(message, isError = false) {
  labEl("lab-hint").textContent = message;
  labEl("lab-hint").className = isError ? "lab-hint error" : "lab-hint";
}

// ---- attention editing ----

function drawEdit(host, data, source) {
  const body = host.querySelector(".edit-body");
  const svg = svgElement(150 + 46 * source.length + 40, 240);
  svg.classList.add("edit-figure");
  sourceLabels(svg, 40, source);
  if (data) {
    barRow(svg, 62, source, data.original_weights, "model's own");
    barRow(svg, 155, source, data.weights, "edited");
  }
  const columns = element("div", { class: "edit-columns" });
  if (data) {
    const prefix = data.prefix.map(clean).join(" ");
    columns.appendChild(element("div", { class: "edit-original" }, `without the edit: ${prefix} ‖ ${data.original.map(clean).join(" ")}`));
    columns.appendChild(element("div", { class: "edit-edited" }, `with it: ${prefix} ‖ ${data.edited.map(clean).join(" ")}`));
  }
  const figure = element("div", { class: "scroller" });
  figure.appendChild(svg);
  body.replaceChildren(columns, figure);
  return svg;
}

function editControls(host, playback) {
  const source = playback.source_tokens;
  const bar = element("div", { class: "edit-controls" });
  const step = element("input", { type: "number", class: "edit-step", min: 0, max: playback.steps.length - 1, value: Math.min(lab.step, playback.steps.length - 1) });
  bar.append(element("span", {}, "at step "), step, element("span", {}, " put all attention on: "));
  const sliders = element("div", { class: "edit-sliders" });
  const decode = async (weights) => {
    try {
      const data = await labApi("/api/lab/edit", { text: lab.text, model: lab.model, step: Number(step.value),
        weights, tokens: lab.result.translations[0].tokens });
      lab.data.edit = data;
      drawEdit(host, data, source);
    } catch (error) { hint(error.message, true); }
  };
  source.forEach((token, j) => {
    const button = element("button", { type: "button", class: "edit-source", "data-col": j }, clean(token) || token);
    button.addEventListener("click", () => decode(source.map((_, k) => (k === j ? 1 : 0))));
    bar.appendChild(button);
    const label = element("label", {}, clean(token) || token);
    label.appendChild(element("input", { type: "range", min: 0, max: 100, value: 0, class: "edit-weight", "data-col": j }));
    sliders.appendChild(label);
  });
  const apply = element("button", { type: "button", class: "edit-apply" }, "decode with these weights");
  apply.addEventListener("click", () => decode([...sliders.querySelectorAll("input")].map((s) => Number(s.value))));
  host.replaceChildren(bar, element("p", {}, "…or drag weights (normalised to sum 1):"), sliders, apply, element("div", { class: "edit-body" }));
  drawEdit(host, null, source);
}

// ---- attention beside saliency ----

function drawSaliency(host, data) {
  const magnitudes = data.saliency.map(Math.abs);
  const top = Math.max(...magnitudes, 1e-12);
  const svg = svgElement(150 + 46 * data.source_tokens.length + 40, 240);
  svg.classList.add("saliency-figure");
  sourceLabels(svg, 40, data.source_tokens);
  barRow(svg, 62, data.source_tokens, data.attention, "attention");
  barRow(svg, 155, data.source_tokens, magnitudes.map((m) => m / top), "|grad × input|");
  const body = host.querySelector(".sal-body");
  const figure = element("div", { class: "scroller" });
  figure.appendChild(svg);
  body.replaceChildren(element("p", { class: "sal-rho" },
    `for ${data.tokens[data.position]}: Spearman rank correlation of attention and |saliency| = ${fmt(data.rank_correlation, 2)}`), figure);
  return svg;
}

function saliencyControls(host, tokens) {
  const bar = element("div", { class: "sal-controls" });
  bar.appendChild(element("span", {}, "explain target subword: "));
  tokens.forEach((token, i) => {
    const button = element("button", { type: "button", class: "sal-target", "data-position": i }, clean(token) || token);
    button.addEventListener("click", async () => {
      try {
        lab.data.saliency = await labApi("/api/lab/saliency", { text: lab.text, model: lab.model, position: i, tokens });
        drawSaliency(host, lab.data.saliency);
      } catch (error) { hint(error.message, true); }
    });
    bar.appendChild(button);
  });
  host.replaceChildren(bar, element("div", { class: "sal-body" }));
}

// ---- training timeline ----

// The attention's AER against eflomal at each validation (train.probe_alignment): alignment forming,
// the validation shown marked.
async function timelineView(host) {
  try {
    lab.data.timeline = await labApi(`/api/timeline?model=${encodeURIComponent(lab.model)}`);
  } catch (error) {
    host.replaceChildren(element("p", { class: "tl-missing" }, error.message));
    return;
  }
  await timelineControls(host, lab.data.timeline, { rowScaled: () => labEl("rowscale").checked });
}

// ---- does attention align? ----

// The translation's words: the attention summed over each word's subwords (a row per target word),
// the model's links (●: each target word's strongest source word) and eflomal's (○) over it, their
// AER; for a Transformer, each decoder layer's each head's AER, the best marked.
// ---- the lab ----

const VIEWS = {
  async tree(host) {
    lab.data.tree = await labApi("/api/lab/tree", { text: lab.text, model: lab.model, beam_size: Number(labEl("beam").value) || undefined });
    await drawTree(host, lab.data.tree, { onContinue: (prefix) => window.nmtPage.setPrefix(lab.model, prefix) });
  },
  async playback(host) {
    const heads = hasView("heads") ? { layer: lab.layer, head: lab.head } : {};
    lab.data.playback = await labApi("/api/lab/playback", { text: lab.text, model: lab.model, tokens: lab.result.translations[0].tokens, ...heads });
    lab.step = Math.min(lab.step, lab.data.playback.steps.length - 1);
    playbackControls(host, lab.data.playback, {
      step: lab.step,
      onStep: (t) => { lab.step = t; },
      onHead: (name, value) => { lab[name] = value; refresh(); },
    });
  },
  async edit(host) {
    lab.data.playback = lab.data.playback || await labApi("/api/lab/playback", { text: lab.text, model: lab.model, tokens: lab.result.translations[0].tokens });
    lab.data.edit = null;
    editControls(host, lab.data.playback);
  },
  async saliency(host) {
    lab.data.saliency = null;
    saliencyControls(host, lab.result.translations[0].tokens);
  },
  timeline: timelineView,
  async heads(host) {
    lab.data.heads = await labApi("/api/lab/heads", { text: lab.text, model: lab.model, tokens: lab.result.translations[0].tokens });
    window.headsView.controls(host, lab.data.heads);
  },
  async align(host) {
    host.replaceChildren(element("div", { class: "align-body" }, "Aligning (eflomal runs beside the training pairs: a few seconds)…"));
    lab.data.align = await labApi("/api/lab/align", { text: lab.text, model: lab.model, tokens: lab.result.translations[0].tokens });
    await drawAlignment(host, lab.data.align);
  },
};

// The lab's views of the chosen model, as its family says (/api/models: a Transformer's heads, an
// RNN's single attention to edit); the timeline is every trained model's.
function hasView(view) {
  return view === "timeline" || ((lab.models[lab.model] || {}).lab_views || []).includes(view);
}

function showTabs() {
  for (const tab of document.querySelectorAll("#lab .tabs button")) {
    const hidden = !hasView(tab.dataset.view);
    tab.hidden = hidden;
    if (hidden && tab.dataset.view === lab.view) document.querySelector("#lab .tabs button[data-view='tree']").click();
  }
}

function selectView(view) {
  document.querySelector(`#lab .tabs button[data-view='${view}']`).click();
}

async function refresh() {
  const host = viewHost(lab.view);
  const needsText = lab.view !== "timeline";
  if (needsText && !(lab.text.trim() && lab.result)) {
    hint("Type a sentence above: the lab takes its translation apart.");
    host.replaceChildren();
    return;
  }
  hint(needsText ? `“${lab.text.trim()}” in ${lab.model}` : `${lab.model}'s training`);
  try {
    await VIEWS[lab.view](host);
    host.dataset.ready = String(Date.now());
  } catch (error) {
    hint(error.message, true);
  }
}

function figureOf(view) {
  return viewHost(view).querySelector(`svg.${{ tree: "tree-figure", playback: "playback-figure", edit: "edit-figure", saliency: "saliency-figure", timeline: "heatmap-figure", heads: "heads-figure", align: "align-figure" }[view]}`);
}

function startLab(models) {
  const select = labEl("lab-model");
  for (const m of models) select.appendChild(element("option", { value: m.name }, m.name));
  for (const m of models) lab.models[m.name] = m;
  lab.model = models.length ? models[0].name : null;
  select.addEventListener("change", () => {
    lab.model = select.value; lab.data = {}; lab.result = null; lab.layer = -1; lab.head = 0;
    showTabs(); window.nmtPage.retranslate(); refresh();
  });
  for (const tab of document.querySelectorAll("#lab .tabs button")) {
    tab.addEventListener("click", () => {
      lab.view = tab.dataset.view;
      document.querySelectorAll("#lab .tabs button").forEach((t) => t.classList.toggle("active", t === tab));
      document.querySelectorAll("#lab .lab-view").forEach((v) => { v.hidden = v.dataset.view !== lab.view; });
      refresh();
    });
  }
  for (const view of Object.keys(VIEWS)) {
    viewHost(view).before(exportButtons(`nmt-${view}`, () => figureOf(view), () => lab.data[view === "timeline" ? "timeline" : view]));
  }
  document.querySelectorAll("#lab .export").forEach((bar, i) => { bar.dataset.view = Object.keys(VIEWS)[i]; bar.hidden = i !== 0; });
  document.querySelectorAll("#lab .tabs button").forEach((tab) => tab.addEventListener("click", () => {
    document.querySelectorAll("#lab .export").forEach((bar) => { bar.hidden = bar.dataset.view !== lab.view; });
  }));
  showTabs();
}

window.nmtLab = {
  playHead(layer, head) {  // from the Heads view: this head, step by step
    lab.layer = layer;
    lab.head = head;
    selectView("playback");
  },
};

window.lab = {
  start: startLab,
  sourceChanged(name, text, result) {
    if (name !== lab.model) return;
    lab.text = text;
    lab.result = result;
    lab.data = { timeline: lab.data.timeline };
    refresh();
  },
  cleared() {
    lab.text = "";
    lab.result = null;
    refresh();
  },
};
