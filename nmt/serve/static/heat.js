// Shared drawing for the page: a colour-blind-safe colour scale (viridis) with a legend,
// attention heatmaps (per-row scaling, keyboard navigation, weights on hover), fonts loaded
// before labels are drawn, and export of any figure as SVG, PNG or JSON.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const LABEL_FONT = '13px system-ui, "Served Devanagari", "Served Arabic", "Served Tamil", "Served Telugu", ' +
  '"Served Thai", "Served Khmer", sans-serif';
// viridis at 9 stops: dark (0) to bright yellow (1); readable in greyscale and for colour-blind eyes
const VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"];

function hexRgb(hex) {
  return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
}

// value in [0, 1] -> "rgb(r, g, b)" on the viridis scale
function colour(value) {
  const v = Math.min(1, Math.max(0, Number.isFinite(value) ? value : 0)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(v));
  const [a, b] = [hexRgb(VIRIDIS[i]), hexRgb(VIRIDIS[i + 1])];
  const t = v - i;
  return `rgb(${a.map((x, k) => Math.round(x + (b[k] - x) * t)).join(", ")})`;
}

// Wait for the served fonts that these labels need, so no label is laid out with boxes first.
async function fontsFor(texts) {
  if (!document.fonts || !document.fonts.load) return;
  try {
    await document.fonts.load(LABEL_FONT, texts.join(" ") || "a");
  } catch (_) { /* a font that fails to load leaves the system's */ }
}

function svgElement(width, height) {
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("xmlns", SVG_NS);
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  return svg;
}

// add(svg, "rect", {x: 1}, "text") -> the element, appended to parent (default svg)
function add(parent, name, attrs, text) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  parent.appendChild(el);
  return el;
}

// A horizontal legend: the colour scale from 0 to `top` with ticks.
function drawLegend(svg, x, y, width, top, caption) {
  const id = `grad${Math.random().toString(36).slice(2, 8)}`;
  const defs = add(svg, "defs", {});
  const grad = add(defs, "linearGradient", { id, x1: "0", x2: "1", y1: "0", y2: "0" });
  VIRIDIS.forEach((c, i) => add(grad, "stop", { offset: `${(100 * i) / (VIRIDIS.length - 1)}%`, "stop-color": c }));
  const group = add(svg, "g", { class: "legend" });
  add(group, "rect", { x, y, width, height: 10, fill: `url(#${id})` });
  for (let i = 0; i <= 4; i++) {
    const tx = x + (width * i) / 4;
    add(group, "line", { x1: tx, x2: tx, y1: y + 10, y2: y + 14, stroke: "#555" });
    add(group, "text", { x: tx, y: y + 25, "text-anchor": "middle", class: "tick" }, ((top * i) / 4).toFixed(2));
  }
  add(group, "text", { x: x + width + 8, y: y + 9, class: "tick" }, caption);
  return group;
}

// A heatmap of cells[r][c] (rows: target labels, cols: source labels) into `host`.
// options: rowScaled (each row divided by its maximum), onCell(r, c), title.
// Keyboard: the figure takes focus; arrows move between cells, the readout names the cell.
async function drawHeatmap(host, rows, cols, cells, options = {}) {
  await fontsFor([...rows, ...cols]);
  const cell = 28, left = 130, top = 90, legendSpace = 44;
  // the colour bar's five ticks need about 40 px each to read apart, however few the columns
  const legendWidth = Math.min(240, Math.max(160, cell * cols.length));
  const width = Math.max(left + cell * cols.length + 20, left + legendWidth + 140);
  const svg = svgElement(width, top + cell * rows.length + legendSpace);
  svg.classList.add("heatmap-figure");
  svg.setAttribute("tabindex", "0");
  svg.setAttribute("role", "grid");
  svg.setAttribute("aria-label", options.title || "attention weights: arrow keys move between cells");
  svg.dataset.fontsReady = String(!document.fonts || document.fonts.check(LABEL_FONT, [...rows, ...cols].join(" ")));
  const shown = cells.map((row) => {
    const max = Math.max(...row, 1e-9);
    return row.map((w) => (options.rowScaled ? w / max : w));
  });
  cols.forEach((label, c) => {
    const x = left + c * cell + cell / 2;
    add(svg, "text", { x, y: top - 8, transform: `rotate(-55 ${x} ${top - 8})`, class: "src", "data-col": c }, label);
  });
  rows.forEach((label, r) => {
    add(svg, "text", { x: left - 8, y: top + r * cell + cell / 2 + 4, "text-anchor": "end", class: "tgt", "data-row": r }, label);
    cols.forEach((colLabel, c) => {
      const rect = add(svg, "rect", {
        x: left + c * cell, y: top + r * cell, width: cell - 1, height: cell - 1,
        fill: colour(shown[r][c]), class: "cell", "data-row": r, "data-col": c, "data-weight": cells[r][c],
      });
      add(rect, "title", {}, `${label} → ${colLabel}: ${cells[r][c].toFixed(3)}`);
      if (options.onCell) rect.addEventListener("click", () => options.onCell(r, c));
    });
  });
  drawLegend(svg, left, top + cell * rows.length + 10, legendWidth, 1,
    options.rowScaled ? "× row maximum" : "attention weight");
  const focus = add(svg, "rect", { class: "focus", width: cell - 1, height: cell - 1, visibility: "hidden" });
  const readout = document.createElement("div");
  readout.className = "readout";
  readout.textContent = "Click the heatmap (or Tab to it) and use the arrow keys to read each weight.";
  let at = null;
  const move = (r, c) => {
    at = [Math.max(0, Math.min(rows.length - 1, r)), Math.max(0, Math.min(cols.length - 1, c))];
    focus.setAttribute("x", left + at[1] * cell);
    focus.setAttribute("y", top + at[0] * cell);
    focus.setAttribute("visibility", "visible");
    readout.textContent = `${rows[at[0]]} → ${cols[at[1]]}: ${cells[at[0]][at[1]].toFixed(4)}`;
    svg.dataset.focus = `${at[0]},${at[1]}`;
  };
  svg.addEventListener("keydown", (event) => {
    const step = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] }[event.key];
    if (!step) return;
    event.preventDefault();
    move(at ? at[0] + step[0] : 0, at ? at[1] + step[1] : 0);
  });
  svg.addEventListener("focus", () => { if (!at) move(0, 0); });
  const scroller = document.createElement("div");
  scroller.className = "scroller";
  scroller.appendChild(svg);
  host.replaceChildren(scroller, readout);
  return svg;
}

// ---- export: the figure as SVG or PNG, the data as JSON ----

function download(name, blob) {
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = name;
  document.body.appendChild(link);
  link.click();
  setTimeout(() => { URL.revokeObjectURL(link.href); link.remove(); }, 1000);
}

function svgText(svg) {
  const copy = svg.cloneNode(true);
  if (svg.dataset.width) {  // a figure fitted to its box (the beam tree): exported whole, at its own size
    copy.setAttribute("width", svg.dataset.width);
    copy.setAttribute("height", svg.dataset.height);
    copy.setAttribute("viewBox", `0 0 ${svg.dataset.width} ${svg.dataset.height}`);
  }
  const style = document.createElementNS(SVG_NS, "style");
  style.textContent = "text { font: 13px system-ui, 'Noto Sans', 'Noto Sans Devanagari', sans-serif; fill: #1d2430; } " +
    ".tick { font-size: 10px; } .dim { opacity: 0.25; }";
  copy.insertBefore(style, copy.firstChild);
  return new XMLSerializer().serializeToString(copy);
}

function pngBlob(svg) {
  return new Promise((resolve, reject) => {
    const image = new Image();
    const width = Number(svg.dataset.width || svg.getAttribute("width"));
    const height = Number(svg.dataset.height || svg.getAttribute("height"));
    image.onload = () => {
      const canvas = document.createElement("canvas");
      canvas.width = 2 * width;
      canvas.height = 2 * height;
      const context = canvas.getContext("2d");
      context.fillStyle = "#fff";
      context.fillRect(0, 0, canvas.width, canvas.height);
      context.scale(2, 2);
      context.drawImage(image, 0, 0, width, height);
      canvas.toBlob(resolve, "image/png");
    };
    image.onerror = reject;
    image.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svgText(svg));
  });
}

// Buttons SVG / PNG / JSON for a view: figure() gives its <svg>, data() its JSON.
function exportButtons(name, figure, data) {
  const bar = document.createElement("div");
  bar.className = "export";
  const make = (label, action) => {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = label;
    button.dataset.export = label.toLowerCase();
    button.addEventListener("click", action);
    bar.appendChild(button);
  };
  make("SVG", () => { const svg = figure(); if (svg) download(`${name}.svg`, new Blob([svgText(svg)], { type: "image/svg+xml" })); });
  make("PNG", async () => { const svg = figure(); if (svg) download(`${name}.png`, await pngBlob(svg)); });
  make("JSON", () => download(`${name}.json`, new Blob([JSON.stringify(data(), null, 1)], { type: "application/json" })));
  return bar;
}
