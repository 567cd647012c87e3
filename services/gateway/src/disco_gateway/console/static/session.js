// The console's live session view: replays the session's events, follows the websocket,
// and sends a person's decisions (approve/deny a tool call, answer a question) over the
// gateway's session API. No framework: the page is one table and a few forms.
(function () {
  "use strict";
  const root = document.getElementById("session");
  if (!root) return;
  const token = root.dataset.token;
  const base = root.dataset.base;
  const events = document.querySelector("#events tbody");
  const pending = document.getElementById("pending");
  const nothing = document.getElementById("nothing-pending");
  const state = document.getElementById("stream-state");
  const problem = document.getElementById("stream-error");
  const seen = new Set();
  const cards = new Map(); // tool_call_id / question_id -> element
  // A question and its answer are known by the question's id and by its correlation id
  // (an answer may name only the latter); a tool approval's question stands for its call.
  const aliases = new Map(); // correlation id -> question id
  const approvalOf = new Map(); // question id or correlation id -> tool_call_id
  const decided = new Set(); // ids already resolved: a late request makes no card
  let lastId = null;
  let socket = null;
  let retry = 500;

  const RESOLVES = {
    TOOL_APPROVED: "tool_call_id", TOOL_DENIED: "tool_call_id",
    TOOL_EXECUTION_STARTED: "tool_call_id", TOOL_EXECUTION_SUCCEEDED: "tool_call_id",
    TOOL_EXECUTION_FAILED: "tool_call_id", TOOL_APPROVAL_TIMED_OUT: "tool_call_id",
    HUMAN_INPUT_RECEIVED: "question_id", HUMAN_INPUT_ANSWERED: "question_id",
    HUMAN_INPUT_TIMED_OUT: "question_id",
  };

  function say(text, isError) {
    problem.hidden = !text;
    problem.textContent = text || "";
    problem.className = isError ? "error" : "muted";
  }

  function headers() {
    return { "Authorization": "Bearer " + token, "Content-Type": "application/json" };
  }

  // A payload as a key/value table a person reads, its raw JSON behind a toggle.
  function scalar(value) {
    const span = document.createElement("span");
    if (value === null || value === undefined) { span.className = "muted"; span.textContent = "—"; }
    else if (typeof value === "string") span.textContent = value;
    else span.textContent = JSON.stringify(value);
    return span;
  }

  function kvTable(value, depth) {
    if (value === null || typeof value !== "object") return scalar(value);
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i + 1), v]) : Object.entries(value);
    if (!entries.length) return scalar(Array.isArray(value) ? "[]" : "{}");
    if (Array.isArray(value) && value.every((v) => v === null || typeof v !== "object")) {
      return scalar(value.map((v) => (typeof v === "string" ? v : JSON.stringify(v))).join(", "));
    }
    if (depth >= 3) {
      const code = document.createElement("code");
      code.textContent = JSON.stringify(value);
      return code;
    }
    const table = document.createElement("table");
    table.className = "kv";
    for (const [key, item] of entries) {
      const row = table.insertRow();
      const head = document.createElement("th");
      head.textContent = key;
      const cell = row.insertCell();
      row.prepend(head);
      cell.append(kvTable(item, depth + 1));
    }
    return table;
  }

  function payloadView(payload) {
    const view = document.createElement("div");
    view.className = "payload";
    view.append(kvTable(payload === undefined ? {} : payload, 0));
    const raw = document.createElement("details");
    raw.className = "raw";
    const label = document.createElement("summary");
    label.textContent = "JSON";
    const pre = document.createElement("pre");
    pre.textContent = JSON.stringify(payload === undefined ? {} : payload, null, 2);
    raw.append(label, pre);
    view.append(raw);
    return view;
  }

  function questionId(p) {
    return p.question_id || p.correlation_id || p.request_id;
  }

  function refreshNothing() {
    nothing.hidden = cards.size > 0;
  }

  function resolve(id, text) {
    if (!id) return;
    decided.add(id);
    const card = cards.get(id);
    if (!card) return;
    cards.delete(id);
    card.classList.add("resolved");
    card.querySelectorAll("button, input, textarea").forEach((el) => { el.disabled = true; });
    const note = card.querySelector(".outcome");
    if (note) note.textContent = text;
    setTimeout(() => { card.remove(); refreshNothing(); }, 1500);
  }

  async function post(path, body, card) {
    const note = card.querySelector(".outcome");
    card.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    try {
      const response = await fetch(base + path, { method: "POST", headers: headers(), body: JSON.stringify(body) });
      if (!response.ok) {
        let text = "HTTP " + response.status;
        try { const e = await response.json(); text = (e.error && e.error.message) || text; } catch (_) { /* not JSON */ }
        note.textContent = text;
        card.querySelectorAll("button").forEach((b) => { b.disabled = false; });
        return;
      }
      note.textContent = "sent";
    } catch (err) {
      note.textContent = String(err);
      card.querySelectorAll("button").forEach((b) => { b.disabled = false; });
    }
  }

  function approvalCard(message) {
    const p = message.payload || {};
    const id = p.tool_call_id;
    const known = cards.get(id);
    if (known && message.agent_name) known.querySelector("b").textContent = message.agent_name;
    if (!id || known || decided.has(id)) return;
    const card = document.createElement("div");
    card.className = "card approval";
    card.dataset.toolCallId = id;
    const title = document.createElement("p");
    title.innerHTML = "<b></b> wants to run <code></code>";
    title.querySelector("b").textContent = message.agent_name || "an agent";
    title.querySelector("code").textContent = p.tool_name || id;
    const args = payloadView(p.arguments === undefined ? {} : p.arguments);
    args.classList.add("arguments");
    const reason = document.createElement("input");
    reason.placeholder = "reason (optional)";
    reason.className = "reason";
    const approve = document.createElement("button");
    approve.textContent = "Approve";
    approve.className = "approve";
    const deny = document.createElement("button");
    deny.textContent = "Deny";
    deny.className = "deny";
    const note = document.createElement("span");
    note.className = "outcome muted";
    approve.onclick = () => post("/approvals/" + encodeURIComponent(id), { decision: "approve", reason: reason.value || null }, card);
    deny.onclick = () => post("/approvals/" + encodeURIComponent(id), { decision: "deny", reason: reason.value || null }, card);
    card.append(title, args, reason, approve, deny, note);
    cards.set(id, card);
    pending.append(card);
    refreshNothing();
  }

  function questionCard(message) {
    const p = message.payload || {};
    const id = questionId(p);
    if (!id) return;
    if (p.correlation_id) aliases.set(p.correlation_id, id);
    const context = p.context || {};
    if (p.kind === "tool_approval" && context.tool_call_id) {
      // The question behind a tool approval: the approval's own card answers it.
      approvalOf.set(id, context.tool_call_id);
      if (p.correlation_id) approvalOf.set(p.correlation_id, context.tool_call_id);
      approvalCard({ agent_name: message.agent_name || context.agent_name, payload: {
        tool_call_id: context.tool_call_id, tool_name: context.tool_name, arguments: context.arguments } });
      return;
    }
    if (cards.has(id) || decided.has(id) || decided.has(p.correlation_id)) return;
    const card = document.createElement("form");
    card.className = "card question";
    card.dataset.questionId = id;
    const title = document.createElement("p");
    title.textContent = (message.agent_name ? message.agent_name + " asks: " : "") + (p.question || "a question");
    card.append(title);
    const answer = document.createElement("input");
    answer.name = "answer";
    answer.className = "answer";
    answer.required = true;
    if (Array.isArray(p.options) && p.options.length) {
      const list = "answer-options-" + id;
      const data = document.createElement("datalist");
      data.id = list;
      for (const option of p.options) {
        const o = document.createElement("option");
        o.value = typeof option.value === "string" ? option.value : JSON.stringify(option.value);
        o.label = option.label || o.value;
        data.append(o);
      }
      answer.setAttribute("list", list);
      card.append(data);
    }
    const send = document.createElement("button");
    send.type = "submit";
    send.textContent = "Answer";
    const note = document.createElement("span");
    note.className = "outcome muted";
    card.append(answer, send, note);
    card.onsubmit = (event) => {
      event.preventDefault();
      post("/answers/" + encodeURIComponent(id), { answer: answer.value }, card);
    };
    cards.set(id, card);
    pending.append(card);
    refreshNothing();
  }

  function show(message) {
    if (message.id && seen.has(message.id)) return;
    if (message.id) { seen.add(message.id); lastId = message.id; }
    const type = message.type || "";
    if (type === "PONG" || type === "ACK") return;
    if (type === "STREAM_GAP") { catchUp(); return; }
    const row = document.createElement("tr");
    row.className = "event";
    row.dataset.type = type;
    const at = document.createElement("td");
    at.className = "at";
    if (message.timestamp) {
      const time = document.createElement("time");
      time.dateTime = message.timestamp;
      time.title = message.timestamp;
      time.textContent = new Date(message.timestamp).toLocaleTimeString([], { hour12: false });
      at.append(time);
    }
    row.append(at);
    for (const text of [message.agent_name || "", type]) {
      const cell = document.createElement("td");
      cell.textContent = text;
      row.append(cell);
    }
    const details = document.createElement("td");
    details.className = "details";
    details.append(payloadView(message.payload));
    row.append(details);
    events.append(row);
    const p = message.payload || {};
    if (type === "TOOL_APPROVAL_REQUESTED") approvalCard(message);
    else if (type === "HUMAN_INPUT_REQUESTED") questionCard(message);
    else if (RESOLVES[type] === "tool_call_id") resolve(p.tool_call_id, type);
    else if (RESOLVES[type]) resolveQuestion(p, type);
  }

  function resolveQuestion(p, text) {
    // An answer names its question by id, or only by correlation id.
    const ids = [questionId(p), p.correlation_id].filter(Boolean);
    for (const id of ids) {
      const call = approvalOf.get(id);
      if (call) { resolve(call, text); return; }
    }
    for (const id of ids) {
      decided.add(id);
      resolve(aliases.get(id) || id, text);
    }
  }

  async function catchUp() {
    // Pages of the replay until it is empty: what happened before (or while) the socket was away.
    for (let page = 0; page < 100; page++) {
      const url = base + "/events" + (lastId ? "?after=" + encodeURIComponent(lastId) : "");
      const response = await fetch(url, { headers: headers() });
      if (response.status === 401 || response.status === 403) {
        window.location = "/console/login?next=" + encodeURIComponent(window.location.pathname);
        return false;
      }
      if (!response.ok) { say("replay failed: HTTP " + response.status, true); return true; }
      const body = await response.json();
      const items = Array.isArray(body) ? body : (body.items || body.events || []);
      const before = lastId;
      items.forEach(show);
      if (!items.length || lastId === before) return true;
    }
    return true;
  }

  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    const query = new URLSearchParams({ access_token: token });
    if (lastId) query.set("after", lastId);
    socket = new WebSocket(scheme + window.location.host + base + "/stream?" + query.toString());
    socket.onopen = () => { state.textContent = "live"; state.className = "badge live"; retry = 500; say(""); };
    socket.onmessage = (event) => {
      try { show(JSON.parse(event.data)); } catch (err) { say("unreadable message: " + err, true); }
    };
    socket.onclose = (event) => {
      state.textContent = "reconnecting";
      state.className = "badge waiting";
      if (event.code === 4401 || event.code === 4403 || event.code === 1008) {
        say("the stream refused the token (" + (event.reason || event.code) + ")", true);
        state.textContent = "closed";
        return;
      }
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }

  setInterval(() => {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "PING" }));
  }, 20000);

  catchUp().then((ok) => { if (ok) connect(); });
})();
