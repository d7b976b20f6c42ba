// What both pages share: the API key (asked for on a 401, kept in this browser only, never in
// a URL), requests that carry it, and server-sent events read from a fetch() body (EventSource
// cannot send an Authorization header).
"use strict";

const Hearth = (() => {
  const KEY = "hearth.apiKey";

  function key() {
    return sessionStorage.getItem(KEY) || localStorage.getItem(KEY) || "";
  }

  // The key dialog, made on first use (both pages share it).
  function keyDialog() {
    let dialog = document.getElementById("key-dialog");
    if (dialog) return dialog;
    dialog = document.createElement("dialog");
    dialog.id = "key-dialog";
    const form = document.createElement("form");
    form.method = "dialog";
    const title = document.createElement("strong");
    title.textContent = "API key";
    const why = document.createElement("span");
    why.className = "why";
    const input = document.createElement("input");
    input.type = "password";
    input.autocomplete = "current-password";
    input.placeholder = "key";
    const remember = document.createElement("label");
    const box = document.createElement("input");
    box.type = "checkbox";
    remember.append(box, " remember in this browser");
    const ok = document.createElement("button");
    ok.className = "primary";
    ok.type = "submit";
    ok.textContent = "OK";
    form.append(title, why, input, remember, ok);
    dialog.append(form);
    document.body.append(dialog);
    return dialog;
  }

  // Shows the key dialog; resolves once a key is entered.
  function askKey(message) {
    const dialog = keyDialog();
    const input = dialog.querySelector("input[type=password]");
    const remember = dialog.querySelector("input[type=checkbox]");
    dialog.querySelector(".why").textContent = message;
    input.value = "";
    return new Promise((resolve) => {
      dialog.onclose = () => {
        const k = input.value.trim();
        sessionStorage.setItem(KEY, k);
        if (remember.checked) localStorage.setItem(KEY, k); else localStorage.removeItem(KEY);
        resolve();
      };
      dialog.showModal();
      input.focus();
    });
  }

  // fetch() with the key; on a 401 asks for it and tries again.
  async function request(path, options = {}) {
    for (;;) {
      const headers = Object.assign({}, options.headers || {});
      const k = key();
      if (k) headers["Authorization"] = "Bearer " + k;
      const r = await fetch(path, Object.assign({}, options, { headers }));
      if (r.status !== 401) return r;
      await askKey(k ? "That key was refused. Enter the server's API key."
                     : "This server needs its API key (hearth serve --api-key).");
    }
  }

  // The error message of a failed response.
  async function errorText(r) {
    try {
      const j = await r.json();
      return (j.error && j.error.message) || r.statusText;
    } catch (e) {
      return r.status + " " + r.statusText;
    }
  }

  // Reads "data: ..." events from a streamed response; calls onData(parsed JSON) for each,
  // stops at "[DONE]" or the end of the body.
  async function readEvents(response, onData) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data: ")) continue;
          const data = line.slice(6);
          if (data === "[DONE]") return;
          onData(JSON.parse(data));
        }
      }
    }
  }

  return { key, askKey, request, errorText, readEvents };
})();
