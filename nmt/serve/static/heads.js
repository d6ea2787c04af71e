// The lab's Heads view for a Transformer: every head of every layer as a grid of small heatmaps
// (a row per layer, a column per head, and the heads' mean last), for the decoder's
// cross-attention (target over source), its causal self-attention, or the encoder's
// self-attention. Clicking a cross-attention head plays it back step by step. One SVG: the
// figure the export buttons save.
"use strict";

const HEAD_KINDS = {
  cross: { label: "cross-attention (target → source)", rows: "tokens", cols: "source_tokens" },
  decoder_self: { label: "decoder self-attention (target → earlier target)", rows: "tokens", cols: "tokens" },
  encoder_self: { label: "encoder self-attention (source → source)", rows: "source_tokens", cols: "source_tokens" },
};

function meanOfHeads(layer) {
  return layer[0].map((row, i) => row.map((_, j) => layer.reduce((sum, head) => sum + head[i][j], 0) / layer.length));
}

// One small heatmap at (x, y): rows x cols cells of `size` pixels, unlabelled (the grid shares
// its axes: the caption under it lists the rows' and columns' subwords; hover a cell for its weight).
function smallHeatmap(svg, x, y, weights, size, caption, attrs) {
  const group = add(svg, "g", { class: "head", transform: `translate(${x} ${y})`, ...attrs });
  weights.forEach((row, i) => row.forEach((w, j) => {
    const cell = add(group, "rect", { x: j * size, y: i * size, width: size, height: size, fill: colour(w),
      class: "cell", "data-row": i, "data-col": j, "data-weight": w });
    add(cell, "title", {}, `${fmtWeight(w)}`);
  }));
  add(group, "rect", { x: 0, y: 0, width: size * weights[0].length, height: size * weights.length, class: "frame",
    fill: "none", stroke: "#888" });
  add(group, "text", { x: 0, y: -4, class: "caption" }, caption);
  return group;
}

function fmtWeight(w) {
  return Number(w).toFixed(3);
}

function drawHeads(host, data, kind) {
  const spec = HEAD_KINDS[kind];
  const layers = data[kind];
  const rows = data[spec.rows], cols = data[spec.cols];
  const size = Math.max(4, Math.min(14, Math.floor(150 / Math.max(rows.length, cols.length))));
  const cellW = size * cols.length + 24, cellH = size * rows.length + 30;
  const left = 70, top = 40;
  const svg = svgElement(left + (data.heads + 1) * cellW + 10, top + layers.length * cellH + 10);
  svg.classList.add("heads-figure");
  for (let h = 0; h <= data.heads; h++) {
    add(svg, "text", { x: left + h * cellW, y: 16, class: "caption" }, h < data.heads ? `head ${h}` : "all heads (mean)");
  }
  layers.forEach((heads, l) => {
    const y = top + l * cellH;
    add(svg, "text", { x: 4, y: y + 12, class: "caption" }, `layer ${l}`);
    heads.forEach((weights, h) => {
      const group = smallHeatmap(svg, left + h * cellW, y, weights, size, "", { "data-layer": l, "data-head": h });
      if (kind === "cross") {
        group.classList.add("playable");
        add(group, "title", {}, `layer ${l}, head ${h}: click to play it back step by step`);
        group.addEventListener("click", () => window.nmtLab.playHead(l, h));
      }
    });
    smallHeatmap(svg, left + data.heads * cellW, y, meanOfHeads(heads), size, "", { "data-layer": l, "data-head": "mean" });
  });
  const figure = element("div", { class: "scroller" });
  figure.appendChild(svg);
  const axes = element("p", { class: "caption" },
    `rows: ${spec.rows === "tokens" ? "target" : "source"} subwords (${rows.map(clean).join(" ")}); ` +
    `columns: ${spec.cols === "tokens" ? "target" : "source"} subwords (${cols.map(clean).join(" ")}).`);
  host.querySelector(".heads-body").replaceChildren(figure, axes);
  return svg;
}

function headsControls(host, data) {
  const select = element("select", { class: "heads-kind", "aria-label": "which attention" });
  for (const [kind, spec] of Object.entries(HEAD_KINDS)) select.appendChild(element("option", { value: kind }, spec.label));
  select.addEventListener("change", () => drawHeads(host, data, select.value));
  const bar = element("div", { class: "heads-controls" });
  bar.append(element("span", {}, "attention "), select,
    element("span", { class: "caption" }, " — each head's weights, and their mean (what the page's heatmap shows of the last layer). Click a cross-attention head to play it back."));
  host.replaceChildren(bar, element("div", { class: "heads-body" }));
  drawHeads(host, data, select.value);
}

window.headsView = { controls: headsControls };
