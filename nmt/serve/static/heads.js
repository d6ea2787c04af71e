// The lab's Heads view for a Transformer. A grid of small heatmaps — a row per layer, a column per
// head, the heads' mean last — is the chooser: for the decoder's cross-attention (target over
// source), its causal self-attention, or the encoder's self-attention. The head chosen (at first the
// last layer's mean, what search and the page's heatmap read) is drawn large below it, with its
// subwords on both axes and a line on what to look for; a cross-attention head plays back step by
// step from there. The grid is one SVG (the figure the export buttons save).
"use strict";

const HEAD_KINDS = {
  cross: {
    label: "cross-attention (target → source)", rows: "tokens", cols: "source_tokens",
    look: "Each row is a target subword; its brightest cell is the source subword it read most when it was " +
      "written. A head that aligns shows a path from corner to corner (bending where the languages order words " +
      "differently); the last layers' heads align best, others spread out or rest on the final <eos>.",
  },
  decoder_self: {
    label: "decoder self-attention (target → earlier target)", rows: "tokens", cols: "tokens",
    look: "Each target subword looks only at itself and the subwords before it (the lower triangle): a head " +
      "bright just left of the diagonal follows the previous subword, the word being built.",
  },
  encoder_self: {
    label: "encoder self-attention (source → source)", rows: "source_tokens", cols: "source_tokens",
    look: "Each source subword's attention to the others: heads bright beside the diagonal read the neighbours, " +
      "heads that light the other pieces of the same word put a word back together.",
  },
};

function meanOfHeads(layer) {
  return layer[0].map((row, i) => row.map((_, j) => layer.reduce((sum, head) => sum + head[i][j], 0) / layer.length));
}

// One small heatmap at (x, y): rows x cols cells of `size` pixels, unlabelled: a thumbnail to choose by.
function smallHeatmap(svg, x, y, weights, size, attrs) {
  const group = add(svg, "g", { class: "head", transform: `translate(${x} ${y})`, tabindex: "0", ...attrs });
  weights.forEach((row, i) => row.forEach((w, j) => {
    add(group, "rect", { x: j * size, y: i * size, width: size, height: size, fill: colour(w),
      class: "cell", "data-row": i, "data-col": j, "data-weight": w });
  }));
  add(group, "rect", { x: -2, y: -2, width: size * weights[0].length + 4, height: size * weights.length + 4,
    class: "frame", fill: "none", stroke: "#888" });
  return group;
}

function drawHeads(host, data, kind, chosen) {
  const spec = HEAD_KINDS[kind];
  const layers = data[kind];
  const rows = data[spec.rows], cols = data[spec.cols];
  const size = Math.max(2, Math.min(6, Math.floor(72 / Math.max(rows.length, cols.length))));
  const cellW = Math.max(size * cols.length + 16, 64), cellH = size * rows.length + 16;
  const left = 60, top = 26;
  const svg = svgElement(left + (data.heads + 1) * cellW + 10, top + layers.length * cellH + 6);
  svg.classList.add("heads-figure");
  for (let h = 0; h <= data.heads; h++) {
    add(svg, "text", { x: left + h * cellW, y: 14, class: "caption" }, h < data.heads ? `head ${h}` : "mean");
  }
  const select = (l, h) => {
    svg.querySelectorAll("g.head.chosen").forEach((g) => g.classList.remove("chosen"));
    svg.querySelector(`g.head[data-layer='${l}'][data-head='${h}']`).classList.add("chosen");
    drawChosen(host, data, kind, l, h);
  };
  layers.forEach((heads, l) => {
    const y = top + l * cellH;
    add(svg, "text", { x: 4, y: y + 10, class: "caption" }, `layer ${l}`);
    [...heads, meanOfHeads(heads)].forEach((weights, h) => {
      const name = h < data.heads ? h : "mean";
      const group = smallHeatmap(svg, left + h * cellW, y, weights, size, { "data-layer": l, "data-head": name });
      add(group, "title", {}, `layer ${l}, ${h < data.heads ? `head ${h}` : "the heads' mean"}: click to see it large`);
      group.addEventListener("click", () => select(l, name));
      group.addEventListener("keydown", (event) => { if (event.key === "Enter") select(l, name); });
    });
  });
  const grid = element("div", { class: "scroller heads-grid" });
  grid.appendChild(svg);
  host.querySelector(".heads-body").replaceChildren(grid, element("p", { class: "heads-look" }, spec.look),
    element("div", { class: "heads-chosen" }));
  const [layer, head] = chosen || [layers.length - 1, "mean"];
  select(layer, head);
  return svg;
}

// The chosen head drawn large: its subwords on both axes (the page's own heatmap), and for a
// cross-attention head the way to its step-by-step playback.
async function drawChosen(host, data, kind, layer, head) {
  const spec = HEAD_KINDS[kind];
  const heads = data[kind][layer];
  const weights = head === "mean" ? meanOfHeads(heads) : heads[head];
  const label = (token) => clean(token) || token;  // views.js's: no broken conjunct, no missing-glyph box
  const rows = data[spec.rows].map(label), cols = data[spec.cols].map(label);
  const box = host.querySelector(".heads-chosen");
  const name = head === "mean" ? `layer ${layer}, the mean of its ${data.heads} heads` : `layer ${layer}, head ${head}`;
  const title = element("p", { class: "heads-title" }, `${name} — ${spec.label}`);
  const figure = element("div", { class: "heads-large" });
  box.replaceChildren(title, figure);
  if (kind === "cross" && head !== "mean" && window.nmtLab) {  // the served lab plays it back; offline, no model to ask
    const play = element("button", { type: "button", class: "heads-play" }, "Step by step ▶");
    play.addEventListener("click", () => window.nmtLab.playHead(layer, head));
    title.append(" ", play);
  }
  const svg = await drawHeatmap(figure, rows, cols, weights, { title: `${name}: arrow keys move between cells` });
  svg.classList.add("heads-chosen-figure");
  svg.dataset.layer = String(layer);
  svg.dataset.head = String(head);
}

function headsControls(host, data) {
  const select = element("select", { class: "heads-kind", "aria-label": "which attention" });
  for (const [kind, spec] of Object.entries(HEAD_KINDS)) select.appendChild(element("option", { value: kind }, spec.label));
  select.addEventListener("change", () => drawHeads(host, data, select.value));
  const bar = element("div", { class: "heads-controls" });
  bar.append(element("span", {}, "attention "), select,
    element("span", { class: "caption" }, " — every head of every layer, and their mean: choose one to see it large."));
  host.replaceChildren(bar, element("div", { class: "heads-body" }));
  drawHeads(host, data, select.value);
}

window.headsView = { controls: headsControls };
