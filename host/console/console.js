// The Weir console: plain JavaScript, no dependencies, no request but to
// this gateway. The admin token is sent once, to sign in, and dropped; the
// session lives in an HttpOnly cookie the script cannot read. The CSRF token
// the sign-in answers is kept here and sent on every change.
"use strict";

(function () {
  const state = { csrf: null, page: "usage" };
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";

  function showError(message) {
    const box = $("error");
    box.textContent = message || "";
    box.hidden = !message;
  }

  // One call to the gateway. Changes carry the CSRF token.
  async function request(method, path, body) {
    const headers = {};
    if (method !== "GET") headers["x-weir-csrf"] = state.csrf || "";
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(path, {
      method, headers, credentials: "same-origin", cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    const data = text ? JSON.parse(text) : null;
    if (!response.ok) {
      const message = data && data.error ? data.error.message : response.status + " " + response.statusText;
      const error = new Error(message);
      error.status = response.status;
      throw error;
    }
    return data;
  }
  const api = (method, path, body) => request(method, "/console/api" + path, body);

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  // A table from column definitions: [heading, value(row), numeric?].
  function fillTable(table, columns, rows) {
    table.replaceChildren();
    const head = el("tr");
    for (const [title, , numeric] of columns) head.append(el("th", title, numeric ? "num" : ""));
    table.append(el("thead"));
    table.tHead.append(head);
    const body = el("tbody");
    for (const row of rows) {
      const tr = el("tr");
      for (const [, value, numeric] of columns) {
        const cell = el("td", undefined, numeric ? "num" : "");
        const content = value(row);
        if (content instanceof Node) cell.append(content); else cell.textContent = content == null ? "" : String(content);
        tr.append(cell);
      }
      body.append(tr);
    }
    table.append(body);
  }

  const tokensOf = (t) => t ? t.input + t.output + t.cache_read + t.cache_write : 0;
  const usd = (n) => (n || 0).toFixed(4);

  // A bar chart as inline SVG: one bar per item, labels under it.
  function barChart(container, items) {
    container.replaceChildren();
    const width = 600, height = 180, pad = 24;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", `0 0 ${width} ${height + pad}`);
    svg.setAttribute("role", "img");
    const max = Math.max(1, ...items.map((item) => item.value));
    const step = items.length ? (width - 2) / items.length : width;
    items.forEach((item, index) => {
      const barHeight = Math.round((item.value / max) * (height - 16));
      const rect = document.createElementNS(SVG, "rect");
      rect.setAttribute("class", "bar-rect");
      rect.setAttribute("x", String(1 + index * step + step * 0.1));
      rect.setAttribute("y", String(height - barHeight));
      rect.setAttribute("width", String(Math.max(1, step * 0.8)));
      rect.setAttribute("height", String(barHeight));
      rect.setAttribute("data-value", String(item.value));
      const title = document.createElementNS(SVG, "title");
      title.textContent = item.title || `${item.label}: ${item.value}`;
      rect.append(title);
      svg.append(rect);
      if (items.length <= 31 || index % Math.ceil(items.length / 24) === 0) {
        const label = document.createElementNS(SVG, "text");
        label.setAttribute("class", "axis");
        label.setAttribute("x", String(1 + index * step + step / 2));
        label.setAttribute("y", String(height + 14));
        label.setAttribute("text-anchor", "middle");
        label.textContent = item.short || item.label;
        svg.append(label);
      }
    });
    container.append(svg);
  }

  // --- Usage -------------------------------------------------------------
  function isoDay(date) { return date.toISOString().slice(0, 10); }

  // The range asked for. With no end date the query is left open-ended (no
  // `until`), and a default start is taken back to its hour: every hour of the
  // range is then whole, so the gateway answers it from its hourly roll-ups
  // instead of reading the calls of the hours at its edges one by one.
  function usageRange() {
    const since = $("usage-since").value ? new Date($("usage-since").value + "T00:00:00Z") : null;
    const until = $("usage-until").value ? new Date($("usage-until").value + "T00:00:00Z") : null;
    const end = until ? new Date(until.getTime() + 86400000) : new Date();
    const hour = 3600000;
    const start = since || new Date(Math.floor((end.getTime() - 7 * 86400000) / hour) * hour);
    return { start, end, open: !until };
  }

  // Latency percentiles as /v1/usage gives them (ms, a histogram bucket's bound).
  function ms(value) { return value == null ? "–" : String(value); }

  function errorCount(totals) { return Object.values(totals.errors).reduce((sum, n) => sum + n, 0); }

  function errorList(totals) {
    return Object.entries(totals.errors).map(([category, n]) => `${category} ${n}`).join(", ");
  }

  // One request answers the page: the totals, the groups and the series.
  async function loadUsage() {
    const { start, end, open } = usageRange();
    const group = $("usage-group").value;
    const bucket = $("usage-bucket").value;
    $("usage-group-name").textContent = group;
    const range = `since=${encodeURIComponent(start.toISOString())}` +
      (open ? "" : `&until=${encodeURIComponent(end.toISOString())}`);
    const sums = await api("GET", `/v1/usage?group_by=${group}&bucket=${bucket}&${range}`);
    $("usage-total-calls").textContent = String(sums.total.calls);
    $("usage-total-tokens").textContent = String(tokensOf(sums.total.tokens));
    $("usage-total-cost").textContent = usd(sums.total.cost_usd);
    $("usage-total-p50").textContent = ms(sums.total.latency_ms.p50);
    $("usage-total-p99").textContent = ms(sums.total.latency_ms.p99);
    $("usage-total-errors").textContent = String(errorCount(sums.total));
    fillTable($("usage-table"), [
      [group, (g) => g[group] == null ? "(none)" : g[group]],
      ["calls", (g) => g.calls, true],
      ["input", (g) => g.tokens.input, true],
      ["output", (g) => g.tokens.output, true],
      ["cache read", (g) => g.tokens.cache_read, true],
      ["USD", (g) => usd(g.cost_usd), true],
      ["calls without a price", (g) => g.calls_without_cost, true],
      ["p50 ms", (g) => ms(g.latency_ms.p50), true],
      ["p99 ms", (g) => ms(g.latency_ms.p99), true],
      ["errors", (g) => errorList(g)],
    ], sums.groups);
    fillTable($("usage-errors"), [["category", (e) => e[0]], ["calls", (e) => e[1], true]],
      Object.entries(sums.total.errors));
    barChart($("usage-group-chart"), sums.groups.map((g) => ({
      label: g[group] == null ? "(none)" : g[group], value: g.calls,
      title: `${g[group]}: ${g.calls} calls, ${tokensOf(g.tokens)} tokens, $${usd(g.cost_usd)}`,
    })));
    // Over time: a bar per hour or day of the range, from the series (buckets without calls are absent there).
    const size = bucket === "hour" ? 3600000 : 86400000;
    const points = new Map(sums.series.map((point) => [Date.parse(point.start), point.total]));
    const buckets = [];
    for (let at = start.getTime() - (start.getTime() % size); at < end.getTime() && buckets.length < 400; at += size) {
      buckets.push(at);
    }
    barChart($("usage-chart"), buckets.map((at) => {
      const total = points.get(at) || { calls: 0, tokens: null, cost_usd: 0 };
      const day = new Date(at);
      const label = size === 3600000 ? day.toISOString().slice(0, 13).replace("T", " ") + "h" : isoDay(day);
      return {
        label, short: size === 3600000 ? day.toISOString().slice(11, 13) : isoDay(day).slice(5),
        value: total.calls,
        title: `${label}: ${total.calls} calls, ${tokensOf(total.tokens)} tokens, $${usd(total.cost_usd)}`,
      };
    }));
  }

  // --- Keys --------------------------------------------------------------
  function actionButton(label, onClick) {
    const button = el("button", label, "secondary");
    button.type = "button";
    button.addEventListener("click", () => run(onClick));
    return button;
  }

  function showToken(token) {
    $("new-token-value").textContent = token;
    $("new-token").hidden = false;
  }

  async function loadKeys() {
    const answer = await api("GET", "/admin/v1/keys?limit=1000");
    fillTable($("keys-table"), [
      ["id", (k) => k.id],
      ["member", (k) => k.member],
      ["team", (k) => k.team],
      ["source", (k) => k.source],
      ["status", (k) => k.status],
      ["admin", (k) => k.admin ? "yes" : ""],
      ["models", (k) => (k.models || []).join(", ")],
      ["expires", (k) => k.expires],
      ["effort", (k) => k.default_effort],
      ["", (k) => {
        if (k.source !== "runtime" || k.status === "revoked") return "";
        const cell = el("span");
        cell.append(
          actionButton("Edit", async () => editKey(k)),
          " ",
          actionButton("Rotate", async () => {
            const rotated = await api("POST", `/admin/v1/keys/${encodeURIComponent(k.id)}/rotate`, {});
            showToken(rotated.token);
            await loadKeys();
          }),
          " ",
          actionButton("Revoke", async () => {
            await api("POST", `/admin/v1/keys/${encodeURIComponent(k.id)}/revoke`, {});
            await loadKeys();
          }));
        cell.dataset.key = k.id;
        return cell;
      }],
    ], answer.data);
  }

  async function createKey() {
    const body = { member: $("key-member").value.trim() };
    const optional = { id: $("key-id").value.trim(), team: $("key-team").value.trim() };
    for (const [name, value] of Object.entries(optional)) if (value) body[name] = value;
    const models = $("key-models").value.split(",").map((m) => m.trim()).filter(Boolean);
    if (models.length) body.models = models;
    if ($("key-admin").checked) body.admin = true;
    const created = await api("POST", "/admin/v1/keys", body);
    showToken(created.token);
    $("key-form").reset();
    await loadKeys();
  }

  // A key's model list, limits, budget, team, expiry and default effort, edited in
  // place (POST /admin/v1/keys/{id}: a field sent as null clears it). The
  // team, expiry and effort are sent only when changed, so saving a key's
  // limits never re-sends its expiry (the gateway refuses an admin key
  // setting its own).
  const TEXT_FIELDS = [["team", "key-edit-team"], ["expires", "key-edit-expires"], ["default_effort", "key-edit-effort"]];
  let editing = null;

  function editKey(key) {
    editing = key;
    $("key-edit-id").textContent = key.id;
    $("key-edit-models").value = (key.models || []).join(", ");
    $("key-edit-rpm").value = key.rpm == null ? "" : String(key.rpm);
    $("key-edit-tpm").value = key.tpm == null ? "" : String(key.tpm);
    for (const [field, input] of TEXT_FIELDS) $(input).value = key[field] || "";
    fillBudget("key-edit", key.budget || {});
    $("key-edit-form").hidden = false;
    $("key-edit-models").focus();
  }

  const wholeOrNull = (text) => text.trim() === "" ? null : Number(text);

  async function saveKeyEdit() {
    const id = $("key-edit-id").textContent;
    const models = $("key-edit-models").value.split(",").map((m) => m.trim()).filter(Boolean);
    const body = {
      models: models.length ? models : null,
      rpm: wholeOrNull($("key-edit-rpm").value),
      tpm: wholeOrNull($("key-edit-tpm").value),
      budget: readBudget("key-edit"),
    };
    for (const [field, input] of TEXT_FIELDS) {
      const value = $(input).value.trim();
      if (value !== (editing[field] || "")) body[field] = value === "" ? null : value;
    }
    await api("POST", `/admin/v1/keys/${encodeURIComponent(id)}`, body);
    $("key-edit-form").hidden = true;
    await loadKeys();
  }

  // --- Members and teams -------------------------------------------------
  // A scope's budget fields, as /admin/v1/members and /teams take them (absent: unlimited).
  const BUDGET_FIELDS = [
    ["daily_tokens", "Daily tokens"], ["monthly_tokens", "Monthly tokens"],
    ["daily_usd", "Daily USD"], ["monthly_usd", "Monthly USD"],
    ["max_call_tokens", "Tokens a call"], ["max_call_usd", "USD a call"],
  ];

  // The budget fields' inputs (ids `${prefix}-${field}`), appended to `parent`.
  function budgetInputs(parent, prefix) {
    for (const [field, label] of BUDGET_FIELDS) {
      const input = el("input");
      input.id = `${prefix}-${field}`;
      input.type = "number";
      input.min = "0";
      input.step = field.endsWith("_usd") ? "any" : "1";
      input.placeholder = "no limit";
      const wrapper = el("label", label);
      wrapper.append(input);
      parent.append(wrapper);
    }
  }

  // A budget as the API takes it, from the inputs `budgetInputs` made (empty: no limit).
  function readBudget(prefix) {
    const budget = {};
    for (const [field] of BUDGET_FIELDS) {
      const text = $(`${prefix}-${field}`).value.trim();
      if (text !== "") budget[field] = Number(text);
    }
    return budget;
  }

  function fillBudget(prefix, budget) {
    for (const [field] of BUDGET_FIELDS) $(`${prefix}-${field}`).value = budget[field] == null ? "" : budget[field];
  }

  function budgetForm(form) {
    const kind = form.dataset.kind;
    budgetInputs(form, kind);
    const save = el("button", "Save budget");
    save.type = "submit";
    form.append(save);
    form.addEventListener("submit", (event) => { event.preventDefault(); run(() => saveScope(kind)); });
  }

  async function loadScopes(kind) {
    const answer = await api("GET", `/admin/v1/${kind}?limit=1000`);
    fillTable($(`${kind}-table`), [
      ["name", (s) => s.name],
      ["source", (s) => s.source],
      ...BUDGET_FIELDS.map(([field, label]) => [label, (s) => s.budget[field] == null ? "" : s.budget[field], true]),
      ["", (s) => {
        if (s.source !== "runtime") return "";
        const cell = el("span");
        cell.dataset.scope = s.name;
        cell.append(
          actionButton("Edit", async () => {
            $(`${kind}-name`).value = s.name;
            fillBudget(kind, s.budget);
          }),
          " ",
          actionButton("Delete", async () => {
            await api("DELETE", `/admin/v1/${kind}/${encodeURIComponent(s.name)}`);
            await loadScopes(kind);
          }));
        return cell;
      }],
    ], answer.data);
  }

  async function saveScope(kind) {
    const name = $(`${kind}-name`).value.trim();
    await api("POST", `/admin/v1/${kind}/${encodeURIComponent(name)}`, { budget: readBudget(kind) });
    $(`${kind}-form`).reset();
    await loadScopes(kind);
  }

  // --- Budgets -----------------------------------------------------------
  function meter(budget) {
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "meter");
    svg.setAttribute("viewBox", "0 0 100 10");
    svg.setAttribute("preserveAspectRatio", "none");
    const limit = Number(budget.limit) || 0;
    const part = (value) => limit > 0 ? Math.min(100, (Number(value) / limit) * 100) : 0;
    const spent = part(budget.spent), held = Math.min(100 - spent, part(budget.held));
    for (const [cls, x, w] of [["track", 0, 100], ["spent", 0, spent], ["held", spent, held]]) {
      const rect = document.createElementNS(SVG, "rect");
      rect.setAttribute("class", cls);
      rect.setAttribute("x", String(x));
      rect.setAttribute("y", "0");
      rect.setAttribute("width", String(w));
      rect.setAttribute("height", "10");
      svg.append(rect);
    }
    const title = document.createElementNS(SVG, "title");
    title.textContent = `spent ${budget.spent}, held ${budget.held} of ${budget.limit}`;
    svg.append(title);
    return svg;
  }

  async function loadBudgets() {
    const answer = await api("GET", "/admin/v1/budgets");
    fillTable($("budgets-table"), [
      ["scope", (b) => b.scope], ["name", (b) => b.name], ["period", (b) => b.period], ["kind", (b) => b.kind],
      ["limit", (b) => b.limit, true], ["spent", (b) => b.spent, true], ["held", (b) => b.held, true],
      ["remaining", (b) => b.remaining, true], ["", meter], ["resets", (b) => b.resets_at],
    ], answer.data);
  }

  // --- Calls -------------------------------------------------------------
  async function searchCalls() {
    const params = new URLSearchParams();
    for (const name of ["member", "key", "model", "category", "since", "until"]) {
      const value = $("calls-" + name).value.trim();
      if (value) params.set(name, value);
    }
    const answer = await api("GET", "/admin/v1/calls?" + params.toString());
    fillTable($("calls-table"), [
      ["call", (c) => {
        const button = actionButton(c.call_id.slice(0, 13) + "…", () => openCall(c.call_id));
        button.dataset.call = c.call_id;
        return button;
      }],
      ["started", (c) => c.started_at], ["member", (c) => c.member], ["key", (c) => c.key_id],
      ["model", (c) => c.model], ["category", (c) => c.category],
      ["tokens", (c) => tokensOf(c.usage), true], ["USD", (c) => c.cost_usd == null ? "" : usd(c.cost_usd), true],
      ["ms", (c) => c.latency_ms, true],
    ], answer.calls);
  }

  async function openCall(id) {
    const call = await api("GET", "/admin/v1/calls/" + encodeURIComponent(id));
    $("call-detail-id").textContent = call.call_id;
    const facts = $("call-detail-facts");
    facts.replaceChildren();
    const pairs = [
      ["started", call.started_at], ["ended", call.ended_at], ["member", call.member], ["key", call.key_id],
      ["team", call.team], ["model", call.model], ["provider", call.provider], ["category", call.category],
      ["stop", call.stop_reason], ["latency ms", call.latency_ms], ["first output ms", call.first_output_ms],
      ["input tokens", call.usage.input], ["output tokens", call.usage.output],
      ["USD", call.cost_usd == null ? "no price" : usd(call.cost_usd)],
    ];
    for (const [name, value] of pairs) {
      if (value === undefined || value === null) continue;
      facts.append(el("dt", name), el("dd", value));
    }
    fillTable($("call-attempts"), [
      ["#", (a) => a.index != null ? a.index : ""],
      ["deployment / endpoint", (a) => a.deployment || a.endpoint_host || ""],
      ["category", (a) => a.category || a.outcome || ""],
      ["status", (a) => a.status != null ? a.status : ""],
      ["ms", (a) => a.latency_ms != null ? a.latency_ms : "", true],
      ["note", (a) => a.note || a.notes || ""],
    ], call.attempts || []);
    $("call-detail-json").textContent = JSON.stringify(call, null, 2);
    $("call-detail").hidden = false;
  }

  // --- Providers and models ----------------------------------------------
  async function loadProviders() {
    const [providers, models] = await Promise.all([api("GET", "/v1/providers"), api("GET", "/v1/models")]);
    fillTable($("providers-table"), [
      ["provider", (p) => p.key], ["source", (p) => p.source], ["trust", (p) => p.trust],
      ["digest", (p) => (p.digest || "").slice(0, 16)], ["configured", (p) => p.configured ? "yes" : "no"],
      ["capabilities", (p) => (p.capabilities || []).join(", ")],
    ], providers.providers);
    fillTable($("rejected-table"), [["rejected file", (r) => r.path], ["reason", (r) => r.reason]], providers.rejected);
    const entries = models.data.filter((m) => m.weir && m.weir.provider !== undefined);
    fillTable($("models-table"), [
      ["model", (m) => m.id], ["provider", (m) => m.weir.provider],
      ["available", (m) => m.weir.available ? "yes" : (m.weir.unavailable_reason || "no")],
      ["in flight", (m) => m.weir.admission ? m.weir.admission.in_flight : "", true],
      ["parked", (m) => m.weir.admission ? m.weir.admission.parked : "", true],
      ["throttle", (m) => m.weir.admission ? m.weir.admission.throttle_coefficient : "", true],
      ["circuits", (m) => (m.weir.deployments || []).map((d) => `${d.id}: ${d.circuit}`).join(", ")],
    ], entries);
  }

  // --- Pages and session ---------------------------------------------------
  const loaders = {
    usage: loadUsage, keys: loadKeys, members: () => loadScopes("members"), teams: () => loadScopes("teams"),
    budgets: loadBudgets, calls: searchCalls, providers: loadProviders,
  };

  async function run(action) {
    showError("");
    try {
      await action();
    } catch (error) {
      if (error.status === 401) return signedOut();
      showError(error.message);
    }
  }

  function show(page) {
    state.page = page;
    for (const name of ["sign-in", ...Object.keys(loaders)]) $("page-" + name).hidden = name !== page;
    for (const button of document.querySelectorAll("#nav [data-page]")) {
      button.classList.toggle("active", button.dataset.page === page);
    }
    if (loaders[page]) {
      document.body.dataset.loaded = "";
      run(loaders[page]).then(() => { document.body.dataset.loaded = page; });
    }
  }

  // The sign-in page offers the ways this gateway allows: an admin key, single sign-on, or both.
  async function signedOut() {
    state.csrf = null;
    $("nav").hidden = true;
    $("who").textContent = "";
    show("sign-in");
    try {
      const methods = await request("GET", "/console/sign-in");
      $("sign-in-form").hidden = !methods.key;
      $("sign-on").hidden = !methods.oidc;
    } catch (error) {
      showError(error.message);
    }
    document.body.dataset.loaded = "sign-in";
  }

  function signedIn(session) {
    state.csrf = session.csrf;
    $("nav").hidden = false;
    $("who").textContent = session.who || "";
    const page = location.hash.slice(1);
    show(loaders[page] ? page : "usage");
  }

  document.addEventListener("DOMContentLoaded", () => {
    for (const button of document.querySelectorAll("#nav [data-page]")) {
      button.addEventListener("click", () => { location.hash = button.dataset.page; });
    }
    window.addEventListener("hashchange", () => {
      const page = location.hash.slice(1);
      if (state.csrf && loaders[page]) show(page);
    });
    $("sign-in-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const token = $("token").value;
      $("token").value = "";
      run(async () => signedIn(await request("POST", "/console/session", { token })));
    });
    $("sign-out").addEventListener("click", () => run(async () => {
      await request("DELETE", "/console/session");
      signedOut();
    }));
    $("usage-form").addEventListener("submit", (event) => { event.preventDefault(); show("usage"); });
    $("key-form").addEventListener("submit", (event) => { event.preventDefault(); run(createKey); });
    $("key-edit-form").addEventListener("submit", (event) => { event.preventDefault(); run(saveKeyEdit); });
    $("key-edit-cancel").addEventListener("click", () => { $("key-edit-form").hidden = true; });
    for (const form of document.querySelectorAll(".budget-form")) budgetForm(form);
    const keyBudget = document.createDocumentFragment();
    budgetInputs(keyBudget, "key-edit");
    $("key-edit-form").insertBefore(keyBudget, $("key-edit-save"));
    $("calls-form").addEventListener("submit", (event) => { event.preventDefault(); run(searchCalls); });
    $("copy-token").addEventListener("click", () => {
      const text = $("new-token-value").textContent;
      if (navigator.clipboard) navigator.clipboard.writeText(text).catch(() => {});
      const range = document.createRange();
      range.selectNodeContents($("new-token-value"));
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
    });
    request("GET", "/console/session").then(signedIn, signedOut);
  });
})();
