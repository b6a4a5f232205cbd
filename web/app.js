// The playground: a chat over the server's OpenAI API, in plain browser JavaScript (no
// library, no build step). It is a client like any other: it streams
// POST /v1/chat/completions, lists GET /v1/models, pulls with Ollama's POST /api/pull, and
// sends the API key typed in, if any.
// URLs are relative, so the page also works behind a proxy that serves it under a prefix.
"use strict";

const KEY_STORAGE = "genai-playground.api-key";
const byId = (id) => document.getElementById(id);
const ui = {
  model: byId("model"),
  apiKey: byId("api-key"),
  temperature: byId("temperature"),
  topP: byId("top-p"),
  maxTokens: byId("max-tokens"),
  minTokens: byId("min-tokens"),
  seed: byId("seed"),
  minP: byId("min-p"),
  speculative: byId("speculative"),
  system: byId("system"),
  clear: byId("clear"),
  messages: byId("messages"),
  status: byId("status"),
  composer: byId("composer"),
  prompt: byId("prompt"),
  send: byId("send"),
  stop: byId("stop"),
  image: byId("image"),
  imagePreview: byId("image-preview"),
  imageRemove: byId("image-remove"),
  answerTemplate: byId("answer-template"),
  pull: byId("pull"),
  pullName: byId("pull-name"),
  pullButton: byId("pull-button"),
  pullProgress: byId("pull-progress"),
  pullStatus: byId("pull-status"),
};

let chat = []; // the conversation so far, sent with every request: {role, content}
let controller = null; // aborts the answer streaming now (null when none is)
let attached = null; // the image to send with the next message, as a data: URL

// ---- talking to the server ------------------------------------------------------------

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = ui.apiKey.value.trim();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

async function errorMessage(response) {
  if (response.status === 401) {
    return ui.apiKey.value.trim()
      ? "The server refused this API key: check the API key field (top right)."
      : "The server needs an API key: fill in the API key field (top right).";
  }
  try {
    const body = await response.json(); // the server's one error shape, or Ollama's on /api/*
    const message = typeof body.error === "string" ? body.error : body.error.message;
    return `${response.status}: ${message}`;
  } catch {
    return `${response.status} ${response.statusText}`;
  }
}

// Fills the model picker; `choose` is selected if listed (else the choice so far is kept).
async function loadModels(choose = "") {
  let response;
  try {
    response = await fetch("v1/models", { headers: headers() });
  } catch (err) {
    setStatus(`Cannot reach the server: ${err.message}`, "error");
    return;
  }
  if (!response.ok) {
    setStatus(await errorMessage(response), "error");
    return;
  }
  const { data } = await response.json();
  const previous = ui.model.value;
  ui.model.replaceChildren(...data.map((m) => new Option(m.id, m.id)));
  const wanted = [choose, previous].find((id) => data.some((m) => m.id === id));
  if (wanted) ui.model.value = wanted;
  setStatus("");
}

// The sampling fields that are filled in, as numbers (the server validates them).
function samplingFields() {
  const fields = {
    temperature: ui.temperature,
    top_p: ui.topP,
    max_tokens: ui.maxTokens,
    min_tokens: ui.minTokens,
    seed: ui.seed,
    min_p: ui.minP,
  };
  const chosen = {};
  for (const [name, input] of Object.entries(fields)) {
    if (input.value.trim() !== "") chosen[name] = Number(input.value);
  }
  return chosen;
}

function requestBody() {
  const system = ui.system.value.trim();
  const body = {
    messages: system ? [{ role: "system", content: system }, ...chat] : [...chat],
    stream: true,
    stream_options: { include_usage: true }, // the last chunk then carries usage and metrics
    ...samplingFields(),
  };
  if (ui.model.value) body.model = ui.model.value;
  if (ui.speculative.value.trim() !== "") {
    // vLLM's shape: n-gram drafts from the chat itself (0 turns the server's off)
    body.speculative = { method: "ngram", num_speculative_tokens: Number(ui.speculative.value) };
  }
  return body;
}

// Server-sent events: each event is lines ("data: ...", or ": comment") ended by a blank
// line. Yields the data of each event. Both "\n" and "\r\n" line endings are read.
async function* sseData(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      const events = buffer.split(/\r?\n\r?\n/);
      buffer = events.pop(); // an event not yet complete
      for (const event of events) {
        const data = event
          .split(/\r?\n/)
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).replace(/^ /, ""));
        if (data.length) yield data.join("\n");
      }
    }
  } finally {
    reader.releaseLock();
  }
}

// Newline-delimited JSON (Ollama's streams): yields each line's object.
async function* jsonLines(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const lines = buffer.split("\n");
      buffer = lines.pop(); // a line not yet complete
      for (const line of lines) if (line.trim()) yield JSON.parse(line);
    }
    if (buffer.trim()) yield JSON.parse(buffer);
  } finally {
    reader.releaseLock();
  }
}

// ---- pulling a model ------------------------------------------------------------------

const megabytes = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;

// Pulls `name` (ORG/REPO[:VARIANT]) with POST /api/pull: each progress line carries one file's
// bytes under its digest, so the bar is the sum over the files seen so far (files are fetched
// one after another; the bar's end grows as each one starts). A failure is a non-2xx answer or,
// once the stream has started, a last line {"error": "..."}.
async function pull(name) {
  const bar = ui.pullProgress;
  const files = new Map(); // digest -> {total, completed}
  let total = 0; // bytes, over the files seen so far
  ui.pull.dataset.outcome = "";
  ui.pullButton.disabled = true;
  bar.hidden = false;
  bar.max = 1;
  bar.value = 0;
  setPullStatus(`Pulling ${name}…`);
  let outcome = "failed";
  try {
    const response = await fetch("api/pull", {
      method: "POST",
      headers: headers(),
      body: JSON.stringify({ model: name, stream: true }),
    });
    if (!response.ok) throw new Error(await errorMessage(response));
    let last = "";
    for await (const line of jsonLines(response)) {
      if (line.error) throw new Error(line.error);
      last = line.status;
      if (line.digest && line.total !== undefined) {
        files.set(line.digest, { total: line.total, completed: line.completed || 0 });
        total = 0;
        let completed = 0;
        for (const file of files.values()) {
          total += file.total;
          completed += file.completed;
        }
        bar.max = Math.max(total, 1);
        bar.value = completed;
        setPullStatus(`${line.status}: ${megabytes(completed)} of ${megabytes(total)}`);
      } else {
        setPullStatus(line.status);
      }
    }
    if (last !== "success") throw new Error(`the pull stopped at "${last}"`);
    outcome = "done";
  } catch (err) {
    setPullStatus(`Pull failed: ${err.message}`, "error");
  } finally {
    ui.pullButton.disabled = false;
  }
  if (outcome === "done") {
    bar.value = bar.max;
    const served = name.replace(/^hf:/, ""); // the name the server serves it under
    await loadModels(served);
    setPullStatus(`Pulled ${served} (${megabytes(total)}): it loads on its first message.`);
  }
  ui.pull.dataset.outcome = outcome;
}

function setPullStatus(text, kind = "") {
  ui.pullStatus.textContent = text;
  ui.pullStatus.classList.toggle("error", kind === "error");
}

// ---- one answer -----------------------------------------------------------------------

async function send(text) {
  const history = chat; // "New chat" while this streams starts another one
  const image = attached;
  clearImage();
  // With an image: OpenAI's content parts (the image first, then the text).
  const parts = image
    ? [{ type: "image_url", image_url: { url: image } }, { type: "text", text }]
    : text;
  history.push({ role: "user", content: parts });
  addUserMessage(text, image);
  const answer = addAnswer();
  const meter = new RateMeter(answer.querySelector(".rate"));
  const content = new FrameText(answer.querySelector(".content"));
  const reasoning = new FrameText(answer.querySelector(".reasoning"));
  controller = new AbortController();
  setBusy(true, answer);
  setStatus("");

  let reply = "";
  let finish = null;
  let usage = null; // the last chunk's: token counts, and what speculation drafted
  let outcome = "failed";
  try {
    const response = await fetch("v1/chat/completions", {
      method: "POST",
      headers: headers(),
      body: JSON.stringify(requestBody()),
      signal: controller.signal,
    });
    if (!response.ok) throw new Error(await errorMessage(response));
    answer.dataset.requestId = response.headers.get("X-Request-ID") || "";
    for await (const data of sseData(response)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message); // ended by the server
      for (const choice of chunk.choices) {
        const delta = choice.delta;
        if (delta.reasoning_content) {
          reasoning.add(delta.reasoning_content);
          meter.tick();
        }
        if (delta.content) {
          reply += delta.content;
          content.add(delta.content);
          meter.tick();
        }
        if (choice.finish_reason) finish = choice.finish_reason;
      }
      if (chunk.usage) usage = chunk.usage;
      if (chunk.metrics) showMetrics(answer, chunk.metrics, finish, usage);
    }
    outcome = "done";
  } catch (err) {
    if (err.name === "AbortError") {
      outcome = "stopped";
      showStopped(answer, meter);
    } else {
      setStatus(err.message, "error");
      answer.querySelector(".stats").textContent = "failed";
    }
  } finally {
    content.flush();
    reasoning.flush();
    meter.stop();
    controller = null;
    setBusy(false, answer);
  }
  answer.dataset.outcome = outcome;
  if (outcome === "failed" && !reply) {
    history.pop(); // not answered: give the message back to edit and send again
    ui.prompt.value ||= text;
  } else {
    history.push({ role: "assistant", content: reply });
  }
}

// Text arrives faster than the screen refreshes: it is added once per frame, not per chunk
// (re-laying out a long answer for every token made the page fall behind the stream).
class FrameText {
  constructor(element) {
    this.element = element;
    this.pending = "";
    this.frame = 0;
  }

  add(text) {
    this.pending += text;
    this.frame ||= requestAnimationFrame(() => this.flush());
  }

  flush() {
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    if (!this.pending) return;
    this.element.hidden = false;
    this.element.append(this.pending);
    this.pending = "";
    scrollDown();
  }
}

const ms = (seconds) => `${(seconds * 1000).toFixed(seconds < 0.01 ? 2 : 1)} ms`;

function showMetrics(answer, m, finish, usage) {
  const stats = answer.querySelector(".stats");
  Object.assign(stats.dataset, { ttft: m.ttft, tpot: m.tpot, tokensPerSecond: m.tokens_per_second });
  // n-gram speculation, where it drafted: the share of drafted tokens the model took
  const drafts = usage && usage.completion_tokens_details;
  let accepted = "";
  if (drafts && drafts.drafted_tokens) {
    Object.assign(stats.dataset, { drafted: drafts.drafted_tokens, accepted: drafts.accepted_tokens });
    const rate = (100 * drafts.accepted_tokens) / drafts.drafted_tokens;
    accepted = ` · ${rate.toFixed(0)}% of ${drafts.drafted_tokens} drafted accepted`;
  }
  stats.textContent =
    `TTFT ${ms(m.ttft)} · TPOT ${ms(m.tpot)} · ${m.tokens_per_second.toFixed(1)} tokens/s · ` +
    `${m.output_tokens} tokens` + accepted + (finish ? ` · ${finish}` : "");
  stats.title = `request ${answer.dataset.requestId}; total ${m.total_latency.toFixed(3)} s`;
}

function showStopped(answer, meter) {
  const seconds = (performance.now() - meter.start) / 1000;
  answer.querySelector(".stats").textContent =
    `stopped after ${meter.count} chunks in ${seconds.toFixed(2)} s; the server cancelled the rest`;
}

// Chunks per second over the last second, sampled every 100 ms while the answer streams and
// drawn on the answer's canvas. A chunk is about one token (several when a stop string held
// text back), so this is the live estimate; the final tokens/s comes from the server.
class RateMeter {
  constructor(canvas) {
    this.canvas = canvas;
    this.start = performance.now();
    this.first = null; // time of the first chunk: the wait before it is TTFT, not decoding
    this.last = null;
    this.recent = []; // times of the chunks in the last second
    this.count = 0;
    this.rates = [0]; // from the request on: nothing comes before the first token
    this.timer = setInterval(() => this.sample(), 100);
  }

  tick() {
    const now = performance.now();
    this.first ??= now;
    this.last = now;
    this.recent.push(now);
    this.count += 1;
  }

  sample(now = performance.now()) {
    while (this.recent.length && this.recent[0] < now - 1000) this.recent.shift();
    const span = this.first === null ? 1000 : Math.max(100, Math.min(1000, now - this.first));
    this.rates.push((this.recent.length * 1000) / span);
    this.draw();
  }

  stop() {
    clearInterval(this.timer);
    if (this.last !== null) this.sample(this.last); // the rate as the stream ended
  }

  draw() {
    const canvas = this.canvas;
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth;
    const height = canvas.clientHeight;
    if (canvas.width !== Math.round(width * ratio)) {
      canvas.width = Math.round(width * ratio);
      canvas.height = Math.round(height * ratio);
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const top = this.rates.reduce((a, b) => Math.max(a, b), 1);
    const x = (i) => (this.rates.length > 1 ? (i / (this.rates.length - 1)) * width : 0);
    const y = (rate) => height - 2 - (rate / top) * (height - 16);
    ctx.strokeStyle = getComputedStyle(canvas).color;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    this.rates.forEach((rate, i) => (i ? ctx.lineTo(x(i), y(rate)) : ctx.moveTo(x(i), y(rate))));
    ctx.stroke();
    ctx.fillStyle = ctx.strokeStyle;
    ctx.font = "11px system-ui, sans-serif";
    const now = this.rates[this.rates.length - 1];
    ctx.fillText(`${now.toFixed(0)} tokens/s (peak ${top.toFixed(0)})`, 4, 11);
  }
}

// ---- the page -------------------------------------------------------------------------

function setStatus(text, kind = "") {
  ui.status.textContent = text;
  ui.status.className = kind;
}

function setBusy(busy, answer) {
  ui.send.disabled = busy;
  ui.stop.disabled = !busy;
  answer.classList.toggle("streaming", busy);
}

function scrollDown() {
  ui.messages.scrollTop = ui.messages.scrollHeight;
}

function addUserMessage(text, image) {
  const div = document.createElement("div");
  div.className = "message user";
  div.innerHTML = '<div class="role">user</div><div class="content"></div>';
  if (image) {
    const img = document.createElement("img");
    img.src = image; // a data: URL read from the user's own file
    img.alt = "attached image";
    div.querySelector(".role").after(img);
  }
  div.querySelector(".content").textContent = text; // text, never HTML
  ui.messages.append(div);
  scrollDown();
}

function clearImage() {
  attached = null;
  ui.image.value = "";
  ui.imagePreview.hidden = true;
  ui.imagePreview.removeAttribute("src");
  ui.imageRemove.hidden = true;
}

ui.image.addEventListener("change", () => {
  const file = ui.image.files[0];
  if (!file) return clearImage();
  const reader = new FileReader();
  reader.onload = () => {
    attached = reader.result;
    ui.imagePreview.src = attached;
    ui.imagePreview.hidden = false;
    ui.imageRemove.hidden = false;
  };
  reader.onerror = () => setStatus(`Cannot read ${file.name}`, "error");
  reader.readAsDataURL(file);
});

ui.imageRemove.addEventListener("click", clearImage);

function addAnswer() {
  const answer = ui.answerTemplate.content.firstElementChild.cloneNode(true);
  ui.messages.append(answer);
  scrollDown();
  return answer;
}

ui.apiKey.value = localStorage.getItem(KEY_STORAGE) || "";
ui.apiKey.addEventListener("change", () => {
  const key = ui.apiKey.value.trim();
  if (key) localStorage.setItem(KEY_STORAGE, key);
  else localStorage.removeItem(KEY_STORAGE);
  loadModels();
});

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = ui.prompt.value.trim();
  if (!text || controller) return;
  ui.prompt.value = "";
  send(text);
});

ui.prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    ui.composer.requestSubmit();
  }
});

// Closing the stream is what cancels the generation: the server stops when its client leaves.
ui.stop.addEventListener("click", () => controller?.abort());

ui.clear.addEventListener("click", () => {
  controller?.abort();
  chat = [];
  clearImage();
  ui.messages.replaceChildren();
  setStatus("");
});

ui.pull.addEventListener("submit", (event) => {
  event.preventDefault();
  const name = ui.pullName.value.trim();
  if (name && !ui.pullButton.disabled) pull(name);
});

loadModels();
