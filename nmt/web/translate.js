// A model that translates in the browser, with no server: the page `nmt export RUN DIR --web`
// writes. SentencePiece (sentencepiece-js, WebAssembly) cuts the text into subwords, the model's
// two ONNX graphs (encoder, one decoder step) run on onnxruntime-web, and search runs here, as
// nmt/decoding/search.py runs it: greedy for beam 1, otherwise beam search with the same ranking
// (log p / lp(length) + coverage), the same stopping rule and the same repeat guard.
"use strict";

const PAD = 0, BOS = 2, EOS = 3;
const NEVER_CHOSEN = [PAD, BOS];  // no search chooses them (nmt/decoding/search.py's NEVER_CHOSEN)
const page = {};  // config, sessions and tokenizers once loaded

async function fetchBytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

async function loadTokenizer(url) {
  window.nmtFiles[url] = await fetchBytes(url);  // read by sentencepiece-js as a file
  const processor = new window.nmtSentencePiece.SentencePieceProcessor();
  await processor.load(url);
  return processor;
}

async function load() {
  page.config = await (await fetch("model/config.json")).json();
  ort.env.wasm.wasmPaths = new URL("runtime/", window.location.href).href;
  ort.env.wasm.numThreads = 1;  // threads need cross-origin isolation, which a static host rarely gives
  const options = { executionProviders: ["wasm"] };
  [page.encoder, page.decoder, page.src, page.tgt] = await Promise.all([
    ort.InferenceSession.create("model/encoder.onnx", options),
    ort.InferenceSession.create("model/decoder_step.onnx", options),
    loadTokenizer(page.config.spm.src),
    loadTokenizer(page.config.spm.tgt),
  ]);
}

// ---- tensors ----

function int64(values, dims) {
  return new ort.Tensor("int64", BigInt64Array.from(values, (v) => BigInt(v)), dims);
}

// rows `rows` of a tensor whose first axis is the batch
function takeRows(tensor, rows) {
  const width = tensor.dims.slice(1).reduce((a, b) => a * b, 1);
  const out = new tensor.data.constructor(rows.length * width);
  rows.forEach((row, i) => out.set(tensor.data.subarray(row * width, (row + 1) * width), i * width));
  return new ort.Tensor(tensor.type, out, [rows.length, ...tensor.dims.slice(1)]);
}

function row(tensor, r) {
  const width = tensor.dims[1];
  return tensor.data.subarray(r * width, (r + 1) * width);
}

// ---- the model, through its graphs ----

async function encode(ids) {
  const out = await page.encoder.run({ src: int64(ids, [1, ids.length]) });
  return { memory: page.config.memory.map((name) => out[name]),
           state: page.config.state.map((name) => out[name]) };
}

async function decodeStep(prevTokens, step, memory, state) {
  const values = { prev_tokens: int64(prevTokens, [prevTokens.length]), step: int64([step], [1]) };
  page.config.memory.forEach((name, i) => { values[name] = memory[i]; });  // with model.lexical: src_embedded too
  page.config.state.forEach((name, i) => { values[name] = state[i]; });
  const feeds = {};
  for (const name of page.decoder.inputNames) feeds[name] = values[name];  // a graph reads only some
  const out = await page.decoder.run(feeds);
  return { logits: out.logits, attention: out.attention, heads: out.heads,
           state: page.config.state.map((n) => out[`next_${n}`]) };
}

// a Transformer's every layer and head of row r (layers x heads x source, flat), or null
function headsRow(out, r) {
  if (!out.heads) return null;
  const width = out.heads.dims.slice(1).reduce((a, b) => a * b, 1);
  return Array.from(out.heads.data.subarray(r * width, (r + 1) * width));
}

// ---- search (nmt/decoding/search.py) ----

function logSumExp(values) {
  let max = -Infinity;
  for (const v of values) if (v > max) max = v;
  let sum = 0;
  for (const v of values) sum += Math.exp(v - max);
  return max + Math.log(sum);
}

// tokens that would repeat a span of up to maxSpan tokens back to back (block_repeats)
function blocked(history, maxSpan) {
  const found = new Set();
  const t = history.length;
  for (let span = 1; span <= maxSpan && 2 * span - 1 <= t; span++) {
    let repeats = true;
    for (let i = 0; i < span - 1; i++) {
      if (history[t + 1 - 2 * span + i] !== history[t + 1 - span + i]) { repeats = false; break; }
    }
    if (repeats) found.add(history[t - span]);
  }
  return found;
}

function lengthNorm(length) {
  const d = page.config.decode;
  return d.length_form === "gnmt" ? ((5 + length) / 6) ** d.length_penalty : Math.max(1, length) ** d.length_penalty;
}

function rank(logProb, length, attention, sourceLength) {
  const beta = page.config.decode.coverage_penalty;
  let coverage = 0;
  if (beta && attention.length) {
    for (let j = 0; j < sourceLength; j++) {
      let sum = 0;
      for (const weights of attention) sum += weights[j];
      coverage += Math.log(Math.min(1, Math.max(1e-6, sum)));
    }
  }
  return logProb / lengthNorm(length) + beta * coverage;
}

function maxOutputLength(sourceLength) {
  const d = page.config.decode;
  return Math.max(1, Math.floor(sourceLength * d.max_len_ratio) + d.max_len_offset);
}

async function greedy(ids) {
  let { memory, state } = await encode(ids);
  const tokens = [], logprobs = [], attention = [], heads = [];
  let prev = BOS, ended = false;
  for (let t = 0; t < maxOutputLength(ids.length); t++) {
    const out = await decodeStep([prev], t, memory, state);
    const logits = row(out.logits, 0);
    const logZ = logSumExp(logits);
    const banned = page.config.decode.no_repeat_span ? blocked(tokens, page.config.decode.no_repeat_span) : new Set();
    NEVER_CHOSEN.forEach((v) => banned.add(v));
    let best = -1;
    for (let v = 0; v < logits.length; v++) if (!banned.has(v) && (best < 0 || logits[v] > logits[best])) best = v;
    logprobs.push(logits[best] - logZ);
    attention.push(Array.from(row(out.attention, 0)));
    heads.push(headsRow(out, 0));
    state = out.state;
    if (best === EOS) { ended = true; break; }
    tokens.push(best);
    prev = best;
  }
  const logProb = logprobs.reduce((a, b) => a + b, 0);
  return { tokens, logprobs, attention, heads, score: logProb / lengthNorm(logprobs.length), ended };
}

async function beamSearch(ids, beamSize) {
  const encoded = await encode(ids);
  let memory = encoded.memory, state = encoded.state;
  let beams = [{ score: 0, tokens: [], logprobs: [], attention: [], heads: [] }];
  const ended = [];
  const span = page.config.decode.no_repeat_span;
  let open = true;
  for (let t = 1; t <= maxOutputLength(ids.length) && open; t++) {
    const prev = beams.map((b) => (b.tokens.length ? b.tokens[b.tokens.length - 1] : BOS));
    const out = await decodeStep(prev, t - 1, memory, state);
    const candidates = [];
    beams.forEach((beam, r) => {
      const logits = row(out.logits, r);
      const logZ = logSumExp(logits);
      const banned = span ? blocked(beam.tokens, span) : new Set();
      NEVER_CHOSEN.forEach((v) => banned.add(v));
      for (let v = 0; v < logits.length; v++) {
        if (!banned.has(v)) candidates.push({ r, v, logprob: logits[v] - logZ, score: beam.score + logits[v] - logZ });
      }
    });
    candidates.sort((a, b) => b.score - a.score);
    const top = candidates.slice(0, 2 * beamSize);
    const grow = (c) => ({ score: c.score, tokens: [...beams[c.r].tokens, c.v],
                           logprobs: [...beams[c.r].logprobs, c.logprob],
                           attention: [...beams[c.r].attention, Array.from(row(out.attention, c.r))],
                           heads: [...beams[c.r].heads, headsRow(out, c.r)] });
    for (const c of top.slice(0, beamSize)) {  // what ends here, among the best beamSize
      if (c.v !== EOS || !Number.isFinite(c.score)) continue;
      const done = grow(c);
      done.tokens.pop();
      ended.push({ ...done, norm: rank(c.score, t, done.attention, ids.length), ended: true });
    }
    if (ended.length >= beamSize || (top[0].v === EOS && ended.length >= 1)) { open = false; break; }
    const kept = top.filter((c) => c.v !== EOS).slice(0, beamSize);
    beams = kept.map(grow);
    const origins = kept.map((c) => c.r);
    state = out.state.map((s) => takeRows(s, origins));
    memory = memory.map((m) => takeRows(m, origins.map(() => 0)));  // one sentence: every row the same
  }
  if (open) {  // at the length limit, the live beams compete with what ended
    for (const b of beams) {
      if (Number.isFinite(b.score)) ended.push({ ...b, norm: rank(b.score, b.tokens.length, b.attention, ids.length), ended: false });
    }
  }
  ended.sort((a, b) => b.norm - a.norm);  // stable: ties keep their order
  const best = ended[0];
  return { tokens: best.tokens, logprobs: best.logprobs, attention: best.attention, heads: best.heads,
           score: best.norm, ended: best.ended };
}

// ---- the page ----

function sourceIds(text) {
  const normalised = text.normalize("NFC").split(/\s+/).filter(Boolean).join(" ");
  if (!normalised) return [];
  const ids = Array.from(page.src.encodeIds(normalised)).slice(0, page.config.decode.max_input_len);
  return [...ids, EOS];
}

async function translate(text, beamSize) {
  const ids = sourceIds(text);
  if (!ids.length) return null;
  const started = performance.now();
  const found = beamSize === 1 ? await greedy(ids) : await beamSearch(ids, beamSize);
  // an incomplete byte sequence (byte-fallback pieces) is dropped, not shown as U+FFFD (Tokenizer.decode)
  const translation = page.tgt.decodeIds(found.tokens).split("\uFFFD").join("").split(/\s+/).filter(Boolean).join(" ");
  return { ids, found, translation, milliseconds: performance.now() - started };
}

let generation = 0;  // a newer keystroke makes an older translation stale

// The heatmap of the translation: the model's attention, or, for a Transformer, the head or the
// layer's mean of heads chosen in #head-choice (its default: the last layer's mean, what search reads).
async function drawAttention() {
  const { rows, cols, result } = page.shown;
  const choice = document.getElementById("head-choice").value;
  let steps = result.found.attention;
  let title = "attention";
  if (page.config.heads && choice !== "") {
    const [layer, head] = choice.split(",").map(Number);
    const { heads } = page.config.heads;
    const source = result.ids.length;
    steps = result.found.heads.map((flat) => {
      const at = (h, j) => flat[(layer * heads + h) * source + j];
      return Array.from({ length: source }, (_, j) =>
        head >= 0 ? at(head, j) : Array.from({ length: heads }, (_, h) => at(h, j)).reduce((a, b) => a + b, 0) / heads);
    });
    title = head >= 0 ? `layer ${layer}, head ${head}` : `layer ${layer}, heads averaged`;
  }
  const cells = steps.slice(0, rows.length).map((weights) => Array.from(weights).slice(0, cols.length));
  await drawHeatmap(document.getElementById("heatmap"), rows, cols, cells, { rowScaled: true, title });
}

// A Transformer's choice of layer and head (or their mean) for the heatmap.
function headChoices() {
  const select = document.getElementById("head-choice");
  const spec = page.config.heads;
  select.hidden = !spec;
  if (!spec) return;
  for (let layer = spec.layers - 1; layer >= 0; layer--) {
    select.appendChild(new Option(`layer ${layer}, heads averaged`, `${layer},-1`));
    for (let head = 0; head < spec.heads; head++) select.appendChild(new Option(`layer ${layer}, head ${head}`, `${layer},${head}`));
  }
  select.addEventListener("change", () => { if (page.shown) drawAttention(); });
}

async function update() {
  const text = document.getElementById("source").value;
  const beamSize = Math.max(1, Math.min(16, Number(document.getElementById("beam").value) || 1));
  const mine = ++generation;
  const result = await translate(text, beamSize);
  if (mine !== generation) return;
  const status = document.getElementById("status");
  if (!result) {
    document.getElementById("translation").textContent = "";
    document.getElementById("heatmap").replaceChildren();
    status.textContent = "Ready.";
    return;
  }
  document.getElementById("translation").textContent = result.translation;
  const cols = result.ids.map((id) => page.config.pieces.src[id] ?? "<eos>");
  const rows = [...result.found.tokens.map((id) => page.config.pieces.tgt[id]), ...(result.found.ended ? ["<eos>"] : [])];
  page.shown = { rows, cols, result };
  await drawAttention();
  status.textContent = `Translated in ${result.milliseconds.toFixed(0)} ms (beam ${beamSize}).`;
  document.body.dataset.translated = String(generation);
}

async function main() {
  const status = document.getElementById("status");
  try {
    const started = performance.now();
    await load();
    page.loadMilliseconds = performance.now() - started;
    const c = page.config;
    document.getElementById("title").textContent = `${c.languages.src_name} → ${c.languages.tgt_name}`;
    document.getElementById("source-lang").textContent = `(${c.languages.src})`;
    document.getElementById("target-lang").textContent = `(${c.languages.tgt})`;
    document.getElementById("beam").value = c.decode.beam_size;
    headChoices();
    const source = document.getElementById("source");
    let timer = null;
    const soon = () => { clearTimeout(timer); timer = setTimeout(update, 150); };
    source.addEventListener("input", soon);
    document.getElementById("beam").addEventListener("change", soon);
    source.disabled = false;
    source.focus();
    status.textContent = `Ready (loaded in ${page.loadMilliseconds.toFixed(0)} ms).`;
    document.body.dataset.ready = "true";
  } catch (error) {
    status.textContent = `The model could not be loaded: ${error.message}. Open this folder through a web server ` +
      "(e.g. python3 -m http.server), not as a file.";
    document.body.dataset.ready = "error";
  }
}

window.nmtTranslate = translate;  // for tests and the console: translate(text, beam) -> result
main();
