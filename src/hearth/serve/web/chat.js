// The chat page: a conversation kept in this browser (localStorage), answers streamed from
// /v1/chat/completions, a stop button that cancels the request on the server.
"use strict";

const STORE = "hearth.chat";
const $ = (id) => document.getElementById(id);
let state = load();
let running = null;  // {controller, id} while an answer streams

function load() {
  try {
    const s = JSON.parse(localStorage.getItem(STORE));
    if (s && Array.isArray(s.messages)) return s;
  } catch (e) { /* a fresh start */ }
  return { messages: [], system: "", temperature: 0.7, maxTokens: 512 };
}

function save() {
  localStorage.setItem(STORE, JSON.stringify(state));
}

// Text with ``` fenced blocks and `inline code`, built as DOM nodes (never innerHTML, so
// nothing the model writes can become markup).
function renderText(el, text) {
  el.replaceChildren();
  const parts = text.split(/```/);
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      const nl = part.indexOf("\n");
      const lang = nl > 0 ? part.slice(0, nl).trim() : "";
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      if (/^[\w+-]+$/.test(lang)) code.dataset.lang = lang;
      code.textContent = nl >= 0 && /^[\w+-]*$/.test(part.slice(0, nl).trim())
          ? part.slice(nl + 1) : part;
      pre.append(code);
      el.append(pre);
      return;
    }
    for (const para of part.split(/\n{2,}/)) {
      if (!para.trim()) continue;
      const p = document.createElement("p");
      para.split(/`([^`\n]+)`/).forEach((bit, j) => {
        if (j % 2 === 1) {
          const c = document.createElement("code");
          c.textContent = bit;
          p.append(c);
        } else {
          p.append(bit);
        }
      });
      el.append(p);
    }
  });
}

function addMessage(m) {
  const div = document.createElement("div");
  div.className = "msg " + m.role + (m.error ? " error" : "");
  const role = document.createElement("div");
  role.className = "role";
  role.textContent = m.role === "user" ? "you" : "assistant";
  const body = document.createElement("div");
  body.className = "body";
  renderText(body, m.content || "");
  div.append(role, body);
  if (m.meta) {
    const meta = document.createElement("div");
    meta.className = "meta";
    meta.textContent = m.meta;
    div.append(meta);
  }
  $("messages").append(div);
  return div;
}

function redraw() {
  $("messages").replaceChildren();
  state.messages.forEach(addMessage);
  $("system").value = state.system;
  $("temperature").value = state.temperature;
  $("max-tokens").value = state.maxTokens;
  scrollDown();
}

function scrollDown() {
  const s = $("scroller");
  s.scrollTop = s.scrollHeight;
}

function setRunning(r) {
  running = r;
  $("send").disabled = !!r;
  $("stop").disabled = !r;
}

async function send(text) {
  state.messages.push({ role: "user", content: text });
  save();
  addMessage(state.messages[state.messages.length - 1]);
  const answer = { role: "assistant", content: "" };
  const div = addMessage(answer);
  const body = div.querySelector(".body");
  div.classList.add("streaming");
  scrollDown();

  const messages = [];
  if (state.system.trim()) messages.push({ role: "system", content: state.system });
  for (const m of state.messages) {
    if (!m.error) messages.push({ role: m.role, content: m.content });
  }
  // Tokens can come faster than a page can lay out a long answer: draw at most every 50 ms.
  let painting = null;
  const paint = () => {
    if (painting) return;
    painting = setTimeout(() => {
      painting = null;
      renderText(body, answer.content);
      scrollDown();
    }, 50);
  };
  const controller = new AbortController();
  setRunning({ controller, id: null });
  const started = performance.now();
  let tokens = 0, finish = null;
  try {
    const r = await Hearth.request("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ messages, stream: true, temperature: Number(state.temperature),
                             max_tokens: Number(state.maxTokens),
                             stream_options: { include_usage: true } }),
      signal: controller.signal,
    });
    if (!r.ok) throw new Error(await Hearth.errorText(r));
    await Hearth.readEvents(r, (chunk) => {
      if (chunk.error) throw new Error(chunk.error.message);
      if (running && !running.id) running.id = chunk.id;
      for (const c of chunk.choices || []) {
        if (c.delta && c.delta.content) {
          answer.content += c.delta.content;
          paint();
        }
        if (c.finish_reason) finish = c.finish_reason;
      }
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
    });
  } catch (e) {
    if (e.name === "AbortError") {
      finish = "stopped";
    } else {
      answer.error = true;
      answer.content += (answer.content ? "\n\n" : "") + "Error: " + e.message;
      div.classList.add("error");
      renderText(body, answer.content);
    }
  }
  clearTimeout(painting);
  if (running && running.stopped) finish = "stopped";  // the server may say "cancelled" first
  renderText(body, answer.content);
  const seconds = (performance.now() - started) / 1000;
  answer.meta = (finish || "stopped") + (tokens ? ` · ${tokens} tokens · ` +
      `${(tokens / seconds).toFixed(1)} tokens/s` : "");
  const meta = document.createElement("div");
  meta.className = "meta";
  meta.textContent = answer.meta;
  div.append(meta);
  div.classList.remove("streaming");
  div.classList.add("done");
  state.messages.push(answer);
  save();
  setRunning(null);
  scrollDown();
}

async function stop() {
  if (!running) return;
  running.stopped = true;
  const { controller, id } = running;
  // Cancel on the server at once, then drop the stream (the server would also notice).
  if (id) {
    try {
      await Hearth.request("/v1/cancel", { method: "POST",
        headers: { "Content-Type": "application/json" }, body: JSON.stringify({ id }) });
    } catch (e) { /* the stream's end tells */ }
  }
  controller.abort();
}

async function showModel() {
  try {
    const r = await Hearth.request("/v1/models");
    if (r.ok) $("model").textContent = (await r.json()).data[0].id;
  } catch (e) { /* offline: the page still works once the server is back */ }
}

window.addEventListener("DOMContentLoaded", () => {
  redraw();
  showModel();
  $("composer").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = $("input").value.trim();
    if (!text || running) return;
    $("input").value = "";
    send(text);
  });
  $("input").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", stop);
  $("new-chat").addEventListener("click", () => {
    if (running) return;
    state.messages = [];
    save();
    redraw();
  });
  for (const [id, field] of [["system", "system"], ["temperature", "temperature"],
                             ["max-tokens", "maxTokens"]]) {
    $(id).addEventListener("change", () => { state[field] = $(id).value; save(); });
  }
});
