// The page: translate as you type, draw each model's attention, explore alternatives.
// Talks only to this server's /api/*; fetches nothing else.
"use strict";

const $ = (id) => document.getElementById(id);
const SPACE = "\u2581"; // SentencePiece's word-start mark
// prefixes: per model, the subwords a chosen alternative fixed as the translation's start.
const state = { models: [], prefixes: {}, results: {}, timer: null, request: 0 };

function detok(pieces) {
  return pieces.join("").split(SPACE).join(" ").trim();
}

// a class's server may need its shared token: the page is opened as /?token=TOKEN
const TOKEN = new URLSearchParams(window.location.search).get("token");

function apiHeaders(json) {
  const headers = json ? { "Content-Type": "application/json" } : {};
  if (TOKEN) headers.Authorization = `Bearer ${TOKEN}`;
  return headers;
}

async function api(path, body) {
  const options = body === undefined ? { headers: apiHeaders(false) } : {
    method: "POST", headers: apiHeaders(true), body: JSON.stringify(body),
  };
  const response = await fetch(path, options);
  const data = await response.json();
  if (!response.ok) throw new Error(`${data.field ? data.field + ": " : ""}${data.error}`);
  return data;
}

function status(message, isError = false) {
  $("status").textContent = message;
  $("status").className = isError ? "status error" : "status";
}

function describeModel(m) {
  return m.summary;  // the model family's own few words (/api/models)
}

async function start() {
  const { models } = await api("/api/models");
  state.models = models;
  $("model-list").textContent = models.map(
    (m) => `${m.name}: ${m.src_lang}→${m.tgt_lang}, ${describeModel(m)}, ` +
      `${(m.parameters / 1e6).toFixed(2)} M parameters` +
      (m.scripts_without_font.length ? ` (no served font for ${m.scripts_without_font.join(", ")}: ` +
        "labels may show boxes unless this browser has one)" : "")).join(" · ");
  if (models.length) $("beam").value = models[0].beam_size;
  const results = $("results");
  for (const model of models) {
    const panel = $("panel").content.firstElementChild.cloneNode(true);
    panel.dataset.model = model.name;
    panel.querySelector(".model-name").textContent = model.name;
    results.appendChild(panel);
  }
  $("source").addEventListener("input", () => { state.prefixes = {}; schedule(); });
  for (const id of ["beam", "nbest", "words", "rowscale"]) $(id).addEventListener("change", () => schedule(0));
  $("prefix-clear").addEventListener("click", () => { state.prefixes = {}; schedule(0); });
  status(models.length ? "ready" : "no models loaded", !models.length);
  window.lab.start(models);
}

// What the lab asks of the page: continue a translation from a chosen start, translate again.
window.nmtPage = {
  setPrefix(name, pieces) {
    state.prefixes[name] = pieces;
    schedule(0);
  },
  retranslate() {
    schedule(0);
  },
};

function schedule(delay = 300) {
  clearTimeout(state.timer);
  state.timer = setTimeout(translateAll, delay);
}

async function translateAll() {
  const text = $("source").value;
  const request = ++state.request;
  showPrefixes();
  if (!text.trim()) {
    for (const panel of document.querySelectorAll(".panel")) clearPanel(panel);
    window.lab.cleared();
    status("ready");
    return;
  }
  const beam = Number($("beam").value) || 1;
  const nBest = Math.min(Number($("nbest").value) || 1, beam);
  status("translating…");
  try {
    await Promise.all(state.models.map(async (model) => {
      const body = {
        text, beam_size: beam, n_best: nBest, prefix_tokens: state.prefixes[model.name] || [], model: model.name,
        attention: true,
      };
      const result = await api("/api/translate", body);
      if (request !== state.request) return; // a newer keystroke won
      state.results[model.name] = { ...result, text };
      render(panelOf(model.name), result);
      if (window.lab) window.lab.sourceChanged(model.name, text, result);
    }));
    if (request === state.request) status(`beam ${beam}, ${nBest}-best`);
  } catch (error) {
    if (request === state.request) status(error.message, true);
  }
}

function panelOf(name) {
  return document.querySelector(`.panel[data-model="${CSS.escape(name)}"]`);
}

function clearPanel(panel) {
  for (const cls of [".translation", ".nbest", ".heatmap", ".alternatives"]) panel.querySelector(cls).replaceChildren();
  panel.querySelector(".alternatives").hidden = true;
}

function showPrefixes() {
  const given = Object.entries(state.prefixes).filter(([, pieces]) => pieces.length);
  $("prefix-bar").hidden = !given.length;
  $("prefix-text").textContent = given.map(
    ([name, pieces]) => (state.models.length > 1 ? `${name}: ${detok(pieces)}` : detok(pieces))).join("; ");
}

function render(panel, result) {
  clearPanel(panel);
  const best = result.translations[0];
  const sentence = panel.querySelector(".translation");
  best.tokens.forEach((token, i) => {
    if (token === "<eos>") return;
    const span = document.createElement("span");
    const probability = Math.exp(best.token_logprobs[i]);
    span.className = token.startsWith(SPACE) && i > 0 ? "tok space" : "tok";
    span.textContent = token.split(SPACE).join("");
    span.dataset.index = i;
    span.dataset.piece = token;
    span.style.background = `rgba(var(--hot), ${(0.08 + 0.5 * probability).toFixed(3)})`;
    span.title = `p = ${probability.toFixed(3)}`;
    span.addEventListener("mouseenter", () => highlight(panel, i));
    span.addEventListener("mouseleave", () => highlight(panel, null));
    span.addEventListener("click", () => showAlternatives(panel, i));
    sentence.appendChild(span);
  });
  const list = panel.querySelector(".nbest");
  for (const t of result.translations) {
    const item = document.createElement("li");
    item.textContent = t.text;
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = t.score.toFixed(3);
    item.appendChild(score);
    list.appendChild(item);
  }
  drawPanelHeatmap(panel, result, best);
}

// Subwords -> words: a word starts at a piece with the space mark (and <eos> stands alone).
function wordGroups(tokens) {
  const groups = [];
  tokens.forEach((token, i) => {
    if (!groups.length || token.startsWith(SPACE) || token === "<eos>" || tokens[i - 1] === "<eos>") {
      groups.push({ label: "", members: [] });
    }
    const group = groups[groups.length - 1];
    group.label += token === "<eos>" ? token : token.split(SPACE).join("");
    group.members.push(i);
  });
  return groups;
}

// Word cells: a source word gets the sum of its pieces' columns, a target word the mean of its rows.
function heatmapView(result, best, words) {
  const single = (tokens) => tokens.map((t, i) => ({ label: t, members: [i] }));
  const cols = words ? wordGroups(result.source_tokens) : single(result.source_tokens);
  const rows = words ? wordGroups(best.tokens) : single(best.tokens);
  const cells = rows.map((row) => cols.map((col) => {
    let sum = 0;
    for (const r of row.members) for (const c of col.members) sum += result.attention[r][c];
    return sum / row.members.length;
  }));
  const rowOfToken = {};
  rows.forEach((row, r) => row.members.forEach((i) => { rowOfToken[i] = r; }));
  return { rows, cols, cells, rowOfToken };
}

async function drawPanelHeatmap(panel, result, best) {
  const view = heatmapView(result, best, $("words").checked);
  panel.view = view;
  const svg = await drawHeatmap(panel.querySelector(".heatmap"), view.rows.map((r) => r.label),
    view.cols.map((c) => c.label), view.cells, { rowScaled: $("rowscale").checked });
  svg.querySelectorAll("text.tgt").forEach((label, r) => {
    label.addEventListener("mouseenter", () => highlightRow(panel, r));
    label.addEventListener("mouseleave", () => highlightRow(panel, null));
  });
}

function highlight(panel, tokenIndex) {
  highlightRow(panel, tokenIndex === null || !panel.view ? null : panel.view.rowOfToken[tokenIndex]);
}

// Hovering a target token: its row stands out and the source it attends to lights up.
function highlightRow(panel, row) {
  const svg = panel.querySelector(".heatmap svg");
  if (!svg) return;
  for (const rect of svg.querySelectorAll("rect.cell")) {
    rect.classList.toggle("dim", row !== null && Number(rect.dataset.row) !== row);
  }
  const weights = row === null ? null : panel.view.cells[row];
  const strongest = weights ? Math.max(...weights) : 0;
  for (const label of svg.querySelectorAll("text.src")) {
    const weight = weights ? weights[Number(label.dataset.col)] : 0;
    label.classList.toggle("lit", weights !== null && weight >= 0.5 * strongest);
  }
}

async function showAlternatives(panel, index) {
  const name = panel.dataset.model;
  const result = state.results[name];
  const pieces = result.translations[0].tokens.slice(0, index);
  const box = panel.querySelector(".alternatives");
  for (const tok of panel.querySelectorAll(".tok")) tok.classList.toggle("active", Number(tok.dataset.index) === index);
  try {
    const body = { text: result.text, prefix_tokens: pieces, k: 8, model: name };
    const { alternatives } = await api("/api/alternatives", body);
    box.replaceChildren(...alternatives.map((alt) => {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "alt";
      button.dataset.token = alt.token;
      button.textContent = alt.token === "<eos>" ? "⏎ end" : alt.token.split(SPACE).join("·");
      const lp = document.createElement("span");
      lp.className = "lp";
      lp.textContent = Math.exp(alt.logprob).toFixed(2);
      button.appendChild(lp);
      button.addEventListener("click", () => choose(name, pieces, alt.token));
      return button;
    }));
    box.hidden = false;
  } catch (error) {
    status(error.message, true);
  }
}

// Choosing an alternative: re-decode with everything up to it forced as the translation's start.
function choose(name, pieces, token) {
  if (token === "<eos>") return;
  state.prefixes[name] = [...pieces, token];
  schedule(0);
}

start().catch((error) => status(error.message, true));
