// kgwise web page: ask (POST /v1/chat/completions), feedback (POST /v1/feedback), router status
// (GET /v1/status), example questions from the KG in use (GET /v1/examples). Talks only to the server that served it; an API key, when the server asks for one
// (401), is kept in localStorage and sent as a bearer token.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY = "kgwise.apiKey";
const state = { models: [], pipelines: [], extra: null, cy: null, timer: null, evidenceAll: false };
window.kgwise = state; // for the browser tests and the curious

// --- HTTP -----------------------------------------------------------------------------------------------

let keyWaiters = [];

function askForKey() {
  return new Promise((resolve) => {
    keyWaiters.push(resolve);
    const dialog = $("key-dialog");
    if (!dialog.open) { dialog.showModal(); $("key-input").focus(); }
  });
}

$("key-form").addEventListener("submit", () => {
  localStorage.setItem(KEY, $("key-input").value.trim());
  $("key-input").value = "";
  $("key-button").hidden = false;
  const waiters = keyWaiters; keyWaiters = [];
  waiters.forEach((w) => w());
});
$("key-button").addEventListener("click", () => { localStorage.removeItem(KEY); askForKey().then(boot); });

async function api(path, body) {
  for (;;) {
    const headers = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    const key = localStorage.getItem(KEY);
    if (key) headers.authorization = "Bearer " + key;
    const res = await fetch(path, { method: body === undefined ? "GET" : "POST", headers,
      body: body === undefined ? undefined : JSON.stringify(body) });
    if (res.status !== 401) return res;
    if (key) localStorage.removeItem(KEY); // a refused key: ask again
    await askForKey();
  }
}

async function readJson(res) {
  const body = await res.json().catch(() => null);
  if (res.ok) return body;
  let msg = `HTTP ${res.status}`;
  if (body && body.error && body.error.message) msg = body.error.message;
  else if (body && body.detail) msg = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
  const err = new Error(msg); err.status = res.status; throw err;
}

// --- small DOM helpers ------------------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}
const pct = (x) => (100 * x).toFixed(x > 0 && x < 0.1 ? 1 : 0) + "%";
function money(x, unit) {
  if (x === 0) return unit === "usd" ? "$0" : `0 ${unit}`;
  if (unit === "usd") return "$" + (x < 0.01 && x > 0 ? x.toFixed(5) : x.toFixed(x < 1 ? 4 : 2));
  return `${+x.toFixed(4)} ${unit}`;
}
function showError(id, msg) { const e = $(id); e.textContent = msg || ""; e.hidden = !msg; }

// --- models --------------------------------------------------------------------------------------------

async function loadModels() {
  const res = await api("/v1/models");
  if (res.status === 404) {
    state.models = [];
    const p = $("no-pipeline");
    p.textContent = "This server serves no pipeline, so there is nothing to ask. Start it with a pipeline " +
      "config (kgwise serve --config kgwise.toml).";
    p.hidden = false;
    $("ask-form").hidden = true;
    return;
  }
  const body = await readJson(res);
  // the ":explain" aliases are for chat clients that see only the message; this page shows the extras itself
  state.models = body.data.map((m) => m.id).filter((m) => !m.endsWith(":explain"));
  const sel = $("model");
  sel.replaceChildren(...state.models.map((m) => el("option", { value: m, text: m })));
  $("ask-form").hidden = false;
  loadExamples().catch((e) => showError("ask-error", "Could not load example questions: " + e.message));
}

// example questions made from the selected pipeline's KG (GET /v1/examples): the placeholders, and buttons
// that fill the form in
async function loadExamples() {
  const pipeline = $("model").value.split("/")[0];
  const body = await readJson(await api("/v1/examples?model=" + encodeURIComponent(pipeline)));
  state.examples = body.examples;
  const first = body.examples[0];
  $("question").placeholder = first ? first.question : "A question about this server's knowledge graph";
  $("choices").placeholder = first ? first.choices.join("\n") : "one choice per line";
  $("examples").replaceChildren("Examples from this knowledge graph: ", ...body.examples.map((x) =>
    el("button", { type: "button", class: "example", text: x.question, onclick: () => {
      $("question").value = x.question; $("choices").value = x.choices.join("\n"); } })));
  $("examples").hidden = !body.examples.length;
}
$("model").addEventListener("change", () => loadExamples().catch((e) =>
  showError("ask-error", "Could not load example questions: " + e.message)));

// --- ask -----------------------------------------------------------------------------------------------

$("ask-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const question = $("question").value.trim();
  const choices = $("choices").value.split("\n").map((c) => c.trim()).filter((c) => c);
  showError("ask-error", "");
  if (choices.length === 1) { showError("ask-error", "Give at least two choices, or none for an open question."); return; }
  const body = { model: $("model").value, messages: [{ role: "user", content: question }] };
  if (choices.length) body.kgwise = { choices };
  $("ask").disabled = true; $("ask-busy").hidden = false;
  try {
    const out = await readJson(await api("/v1/chat/completions", body));
    render(out.kgwise);
  } catch (e) {
    showError("ask-error", e.message);
  } finally {
    $("ask").disabled = false; $("ask-busy").hidden = true;
  }
});

function render(x) {
  state.extra = x;
  $("result").hidden = false;
  $("answer").textContent = x.choice ? `${x.choice}) ${x.answer}` : x.answer;
  $("arm").textContent = x.arm + (x.forced ? " (forced)" : "");
  const scores = Object.entries(x.scores).sort((a, b) => b[1] - a[1]);
  const vals = scores.map((s) => s[1]);
  const lo = Math.min(0, ...vals), hi = Math.max(...vals);
  $("scores").tBodies[0].replaceChildren(...scores.map(([arm, s]) => el("tr",
    { class: arm === x.arm ? "chosen" : "", "data-arm": arm },
    el("td", { text: arm }),
    el("td", {}, el("span", { class: "bar", style: `width:${hi > lo ? 4 + 80 * (s - lo) / (hi - lo) : 84}px` }),
      s.toFixed(3)))));
  renderSet(x);
  // [answer_sets] abstain: "not sure" (the set above is what can be said) or the promise of the answer
  if (x.abstention) $("set").prepend(el("p", { class: x.abstention.abstained ? "warn abstention" : "ok abstention",
    text: (x.abstention.abstained ? "Not sure — " : "Answered with a promise: ") + x.abstention.promise }));
  $("cost").textContent = money(x.cost, x.cost_unit);
  const u = x.usage;
  $("usage").textContent = `${u.input_tokens} prompt + ${u.output_tokens} completion tokens, ${u.calls} call` +
    (u.calls === 1 ? "" : "s") + (u.cached_calls ? ` (+${u.cached_calls} cached)` : "");
  $("decision").textContent = x.decision_id;
  $("fb-correct").disabled = false; $("fb-wrong").disabled = false; $("fb-done").textContent = "";
  renderEvidence(x);
}

$("evidence-more").addEventListener("click", () => renderEvidence(state.extra, !state.evidenceAll));

const SET_SHOWN = 30;

function renderSet(x) {
  const box = $("set");
  const s = x.answer_set;
  if (!s) {
    box.replaceChildren(el("p", { class: "empty", text: "No calibrated set: this pipeline has no calibration, " +
      "so the answer comes without a coverage guarantee." }));
    return;
  }
  const text = (m) => {
    const c = (x.choices || []).find((c) => c.label === m);
    return c ? `${m}) ${c.text}` : m;
  };
  const member = (m) => el("span", { class: "pill" + (m === x.choice || m === x.answer ? " chosen" : "") }, text(m));
  // an open question's set can hold hundreds of KG entities (UAG's largest set): the rest folds away
  const shown = s.members.slice(0, SET_SHOWN), rest = s.members.slice(SET_SHOWN);
  box.replaceChildren(
    el("div", {}, ...shown.map(member),
      rest.length ? el("details", { class: "set-rest" }, el("summary", { text: `and ${rest.length} more` }), ...rest.map(member)) : null),
    el("p", { class: s.guaranteed ? "ok" : "warn", id: "set-guarantee",
      text: (s.guaranteed ? "✓ guaranteed: " : "✗ not guaranteed: ") + s.guarantee }),
    el("p", { class: "hint", text: `α = ${s.alpha}: the set should hold the right answer at least ${pct(1 - s.alpha)} of the time` }));
}

// Evidence shown at first: at most EVIDENCE_NODES nodes (choices included), what a person reads at a glance.
// Concepts are taken in this order while they fit: the paths that support the answer, the other paths
// best first (the server ranks them), the question concepts, the choices' concepts, then the other facts
// the arm read; a fact is drawn when both its ends are. "Show all" draws every one.
const EVIDENCE_NODES = 25;

function renderEvidence(x, all = false) {
  state.evidenceAll = all;
  const ev = x.evidence;
  const empty = $("evidence-empty");
  const nodes = new Map(), edges = new Map();
  const node = (id, label, cls) => {
    const n = nodes.get(id) || { data: { id, label }, classes: new Set() };
    cls.split(" ").filter(Boolean).forEach((c) => n.classes.add(c));
    nodes.set(id, n);
    return id;
  };
  const concept = (label) => node("c:" + label, label, "e");
  const edge = (a, rel, b, cls) => {
    const id = `${a}\u0001${rel}\u0001${b}`;
    const e = edges.get(id) || { data: { id, source: a, target: b, label: rel }, classes: new Set() };
    cls.split(" ").filter(Boolean).forEach((c) => e.classes.add(c));
    edges.set(id, e);
  };
  const hops = (p, cls) => p.relations.forEach((r, i) => {
    const a = concept(p.nodes[i]), b = concept(p.nodes[i + 1]);
    if (p.inverse[i]) edge(b, r, a, cls); else edge(a, r, b, cls);
  });
  let total = 0;
  if (ev) {
    const support = ev.support || [];
    const choices = x.choices || [];
    const every = new Set([...ev.question_concepts, ...ev.choice_concepts.flat(),
      ...ev.triples.flatMap((t) => [t.head, t.tail]), ...ev.paths.flatMap((p) => p.nodes)]);
    total = every.size + choices.length;
    const kept = new Set();
    const fits = (labels) => {
      const extra = [...new Set(labels)].filter((l) => !kept.has(l));
      if (!all && kept.size + choices.length + extra.length > EVIDENCE_NODES) return false;
      extra.forEach((l) => kept.add(l));
      return true;
    };
    const shownPaths = [...support, ...ev.paths].filter((p) => fits(p.nodes));
    ev.question_concepts.forEach((c) => fits([c]));
    ev.choice_concepts.forEach((cs) => cs.forEach((k) => fits([k])));
    ev.triples.forEach((t) => fits([t.head, t.tail]));
    ev.question_concepts.filter((c) => kept.has(c)).forEach((c) => node("c:" + c, c, "q"));
    choices.forEach((c, i) => {
      const inSet = x.answer_set && x.answer_set.members.includes(c.label);
      const id = node("choice:" + c.label, `${c.label}) ${c.text}`,
        "ch" + (c.label === x.choice ? " chosen" : "") + (inSet ? " inset" : ""));
      (ev.choice_concepts[i] || []).filter((k) => kept.has(k)).forEach((k) => edge(id, "grounded as", concept(k), "ground"));
    });
    ev.triples.filter((t) => kept.has(t.head) && kept.has(t.tail))
      .forEach((t) => edge(concept(t.head), t.relation, concept(t.tail), "triple"));
    shownPaths.forEach((p) => hops(p, "path"));
    support.filter((p) => p.nodes.every((n) => kept.has(n))).forEach((p) => {
      hops(p, "support");
      p.nodes.forEach((n) => nodes.get("c:" + n).classes.add("support"));
    });
    if (!x.choices) {
      for (const n of nodes.values()) if (n.data.label.toLowerCase() === x.answer.toLowerCase()) n.classes.add("chosen");
    }
  }
  const more = $("evidence-more");
  more.hidden = !ev || (total <= nodes.size && !all);
  more.textContent = all ? `Show the ${EVIDENCE_NODES} most relevant nodes` : `Show all ${total} nodes`;
  const els = [...nodes.values(), ...edges.values()].map((e) => ({ data: e.data, classes: [...e.classes].join(" ") }));
  $("knowledge").textContent = ev && ev.text ? ev.text : "(no knowledge was given to the model)";
  if (state.cy) { state.cy.destroy(); state.cy = null; }
  if (!ev || (!ev.triples.length && !ev.paths.length && !ev.question_concepts.length)) {
    empty.textContent = ev ? "The arm used no KG knowledge for this question (nothing was grounded)." :
      `The arm ${x.arm} answered without KG evidence.`;
    empty.hidden = false; $("graph").hidden = true; $("legend").hidden = true;
    return;
  }
  empty.hidden = true; $("graph").hidden = false; $("legend").hidden = false;
  for (const c of ["ch", "inset"]) $("legend").querySelector(".lg." + c).hidden = !x.choices; // no choices: no choice nodes
  if (typeof cytoscape !== "function") { empty.textContent = "The graph library did not load."; empty.hidden = false; return; }
  state.cy = cytoscape({
    container: $("graph"), elements: els, wheelSensitivity: 0.3,
    style: [
      { selector: "node", style: { label: "data(label)", "font-size": 11, "text-valign": "bottom", "text-margin-y": 3,
        "background-color": "#718096", width: 16, height: 16, "text-wrap": "wrap", "text-max-width": 140, color: "#1a202c",
        "text-outline-color": "#fff", "text-outline-width": 2 } },
      { selector: "node.q", style: { "background-color": "#2b6cb0", width: 22, height: 22, "font-weight": 600 } },
      { selector: "node.ch", style: { shape: "round-rectangle", "background-color": "#d69e2e", width: 28, height: 18 } },
      { selector: "node.inset", style: { "border-width": 2, "border-color": "#2f855a" } },
      { selector: "node.chosen", style: { "background-color": "#2f855a", "border-width": 3, "border-color": "#22543d", "font-weight": 700 } },
      { selector: "edge", style: { "curve-style": "bezier", "target-arrow-shape": "triangle", label: "data(label)",
        "font-size": 10, "text-rotation": "autorotate", "text-background-color": "#fff", "text-background-opacity": 0.85,
        "text-background-padding": 1, "line-color": "#a0aec0", "target-arrow-color": "#a0aec0", width: 1.5, color: "#4a5568" } },
      { selector: "edge.triple, edge.path", style: { "curve-style": "unbundled-bezier", "control-point-distances": 28,
        "control-point-weights": 0.5 } },
      { selector: "edge.path", style: { "line-color": "#2b6cb0", "target-arrow-color": "#2b6cb0", width: 2.5 } },
      { selector: "edge.support", style: { "line-color": "#2f855a", "target-arrow-color": "#2f855a", width: 4.5 } },
      { selector: "node.support", style: { "border-width": 2, "border-color": "#2f855a" } },
      { selector: "edge.ground", style: { "line-style": "dashed", "target-arrow-shape": "none", "line-color": "#d69e2e" } },
    ],
    layout: nodes.size <= 60
      // question concepts on top, the KG between, the choices below: readable for a question's evidence
      ? { name: "breadthfirst", roots: "node.q", directed: false, spacingFactor: 1.05, padding: 20,
          nodeDimensionsIncludeLabels: true, animate: false }
      : { name: "cose", animate: false, nodeDimensionsIncludeLabels: true, padding: 20,
          nodeRepulsion: () => 12000, idealEdgeLength: () => 100 },
    maxZoom: 1.6,
  });
}

async function sendFeedback(decision, correct, pipeline) {
  return readJson(await api("/v1/feedback", { decision_id: decision, correct, model: pipeline }));
}

for (const [id, correct] of [["fb-correct", true], ["fb-wrong", false]]) {
  $(id).addEventListener("click", async () => {
    const x = state.extra; if (!x) return;
    $("fb-correct").disabled = true; $("fb-wrong").disabled = true;
    try {
      const out = await sendFeedback(x.decision_id, correct, x.pipeline);
      $("fb-done").textContent = `recorded: ${out.correct ? "right" : "wrong"} (arm ${out.arm})`;
    } catch (e) {
      $("fb-done").textContent = "not recorded: " + e.message;
    }
  });
}

// --- router page ------------------------------------------------------------------------------------------

function chart(p) {
  const W = 600, H = 160, L = 52, R = 10, T = 10, B = 22;
  const pts = p.history;
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`); svg.setAttribute("class", "chart");
  svg.setAttribute("role", "img"); svg.setAttribute("aria-label", "spend over time");
  const add = (tag, attrs, text) => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e); return e;
  };
  const t0 = pts[0].t, t1 = Math.max(pts[pts.length - 1].t, t0 + 1);
  const top = Math.max(...pts.map((q) => q.spent));
  const showBudget = p.budget !== null && top >= 0.25 * p.budget; // else the curve would hug the axis
  const ymax = Math.max(showBudget ? p.budget : 0, top) * 1.05 || 1;
  const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0), y = (v) => H - B - (H - T - B) * v / ymax;
  add("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#cbd5e0" });
  add("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#cbd5e0" });
  add("text", { x: L - 4, y: y(0) + 3, "text-anchor": "end" }, money(0, p.cost_unit));
  add("text", { x: L - 4, y: y(ymax / 1.05) + 3, "text-anchor": "end" }, money(ymax / 1.05, p.cost_unit));
  if (p.budget !== null && !showBudget) {
    add("text", { x: W - R, y: T + 4, "text-anchor": "end" }, `budget ${money(p.budget, p.cost_unit)} is above this scale`);
  }
  if (showBudget) {
    add("line", { x1: L, x2: W - R, y1: y(p.budget), y2: y(p.budget), stroke: "#c53030", "stroke-dasharray": "5 4" });
    add("text", { x: W - R, y: y(p.budget) - 4, "text-anchor": "end" }, "budget");
  }
  add("text", { x: L, y: H - 6 }, new Date(t0 * 1000).toLocaleTimeString());
  add("text", { x: W - R, y: H - 6, "text-anchor": "end" }, new Date(t1 * 1000).toLocaleTimeString());
  // spend moves in steps: hold each sample until the next
  const d = pts.map((q, i) => (i ? `H${x(q.t).toFixed(1)} V` : `M${x(q.t).toFixed(1)},`) + y(q.spent).toFixed(1)).join(" ");
  add("path", { d, fill: "none", stroke: "#2b6cb0", "stroke-width": 2 });
  pts.slice(-1).forEach((q) => add("circle", { cx: x(q.t), cy: y(q.spent), r: 3, fill: "#2b6cb0" }));
  return svg;
}

function coverageCell(a) {
  if (a.coverage_target === null) return el("td", { class: "hint coverage", text: "no calibration" });
  if (a.coverage === null) return el("td", { class: "hint coverage", text: `no feedback yet (target ≥ ${pct(a.coverage_target)})` });
  // red only when the Clopper–Pearson upper bound is below target: a few misses are noise, not drift
  return el("td", { class: "coverage" },
    el("span", { class: "cov" }, el("i", { class: a.drift ? "low" : "", style: `width:${100 * a.coverage}%` }),
      el("b", { style: `left:${100 * a.coverage_target}%` })),
    el("span", { class: a.drift ? "warn" : "ok", text: `${pct(a.coverage)} of ${a.coverage_n}` }),
    el("span", { class: "hint", text: ` (bounds ${pct(a.coverage_lower)}–${pct(a.coverage_upper)}, target ≥ ${pct(a.coverage_target)})` }),
    a.drift ? el("span", { class: "warn drift", text: " drift: below target beyond noise" }) : null);
}

function calibrationCell(a) {
  if (a.calibration_questions === null) return el("td", { class: "hint calibration", text: "no calibration" });
  const open = a.open_certified === null ? "" : a.open_certified ? "; open questions: certified" : "; open questions: not certified (no guarantee)";
  return el("td", { class: "calibration", text: `${a.calibration_questions} held-out questions${open}` });
}

function abstentionCell(a) {
  const ab = a.abstention;
  if (!ab || !ab.asked) return el("td", { class: "hint abstention", text: ab ? "no question yet" : "off" });
  const right = ab.accuracy_answered === null ? "no feedback yet" : `right on ${pct(ab.accuracy_answered)} of ${ab.graded} graded`;
  return el("td", { class: "abstention", text: `answered ${ab.answered} of ${ab.asked} (${pct(ab.share_answered)}), ${right}` });
}

function renderPipeline(p) {
  const box = el("section", { class: "pipeline", "data-pipeline": p.name });
  box.append(el("h2", { text: `Pipeline ${p.name}` }));
  const spendText = p.budget === null ? `${money(p.spent, p.cost_unit)} spent`
    : `${money(p.spent, p.cost_unit)} spent of ${money(p.budget, p.cost_unit)} (${pct(p.budget ? p.spent / p.budget : 0)})`;
  const meter = p.budget === null
    ? el("p", { class: "hint", text: "No router budget is configured: spend is counted but not capped." })
    : el("div", { class: "meter" }, el("div", { style: `width:${Math.min(100, 100 * p.spent / (p.budget || 1))}%` }));
  const hist = p.history.length >= 2 && p.history.some((q) => q.spent !== p.history[0].spent)
    ? chart(p) : el("p", { class: "empty", text: "No spending since this server started: the curve appears after the first paid answer." });
  box.append(el("div", { class: "spend" }, el("div", {}, el("div", { class: "big spent", text: spendText }), meter), hist));
  box.append(el("h3", { text: "Arms" }));
  if (p.pinned) box.append(el("p", { class: "hint pinned", text: `Pinned to ${p.pinned}: on the fit's log routing did not beat this arm alone, so it answers wherever it can (kgwise fit; [router] pin_single_arm).` }));
  const abstains = p.arms.some((a) => a.abstention);
  const rows = p.arms.map((a) => el("tr", { "data-arm": a.name },
    el("td", { text: a.name }),
    el("td", { class: "selections", text: String(a.selections) }),
    el("td", { class: "graded", text: String(a.graded) }),
    el("td", { class: "accuracy", text: a.accuracy === null ? "no feedback yet" : `${pct(a.accuracy)} (${a.correct}/${a.graded})` }),
    coverageCell(a), calibrationCell(a), abstains ? abstentionCell(a) : null));
  box.append(el("table", { class: "arms" },
    el("thead", {}, el("tr", {}, ...["arm", "selections", "with feedback", "observed accuracy", "live coverage of the calibrated set", "next sets calibrated on"].concat(abstains ? ["abstention: answered, accuracy among answered"] : []).map((h) => el("th", { text: h })))),
    el("tbody", {}, ...rows)));
  if (p.alpha === null) box.append(el("p", { class: "empty", text: "No calibration: answers carry no calibrated set, so there is no coverage to track." }));
  box.append(el("h3", { text: `Pending decisions (${p.pending_total})` }));
  if (!p.pending.length) {
    box.append(el("p", { class: "empty pending-empty", text: "No decision is waiting for feedback." }));
  } else {
    const fb = (d, correct) => el("button", { type: "button", class: correct ? "good" : "bad",
      onclick: async (ev) => {
        ev.target.disabled = true;
        try { await sendFeedback(d.decision_id, correct, p.name); } catch (e) { alert(e.message); }
        loadStatus();
      } }, correct ? "✓" : "✗");
    box.append(el("table", { class: "pending" },
      el("thead", {}, el("tr", {}, ...["decision", "arm", "question", "feedback"].map((h) => el("th", { text: h })))),
      el("tbody", {}, ...p.pending.slice().reverse().map((d) => el("tr", { "data-decision": d.decision_id },
        el("td", {}, el("code", { text: d.decision_id })), el("td", { text: d.arm }),
        el("td", { text: d.question.length > 120 ? d.question.slice(0, 117) + "…" : d.question }),
        el("td", {}, fb(d, true), " ", fb(d, false)))))));
    if (p.pending_total > p.pending.length) box.append(el("p", { class: "hint", text: `showing the ${p.pending.length} most recent` }));
  }
  return box;
}

async function loadStatus() {
  const res = await api("/v1/status");
  const empty = $("router-empty");
  if (res.status === 404) {
    empty.textContent = "This server serves no pipeline: there is no router to show.";
    empty.hidden = false; $("pipelines").replaceChildren(); return;
  }
  try {
    const body = await readJson(res);
    state.pipelines = body.pipelines;
    empty.hidden = true;
    $("pipelines").replaceChildren(...body.pipelines.map(renderPipeline));
    $("pipelines").dataset.loaded = String(Date.now());
  } catch (e) {
    empty.textContent = "Could not read the router status: " + e.message; empty.hidden = false;
  }
}

// --- navigation ------------------------------------------------------------------------------------------

function route() {
  const router = location.hash === "#router";
  $("view-ask").hidden = router; $("view-router").hidden = !router;
  $("tab-ask").classList.toggle("active", !router); $("tab-router").classList.toggle("active", router);
  clearInterval(state.timer);
  if (router) { loadStatus(); state.timer = setInterval(loadStatus, 5000); }
}

async function boot() {
  if (localStorage.getItem(KEY)) $("key-button").hidden = false;
  try { await loadModels(); } catch (e) { showError("ask-error", "Could not list the models: " + e.message); }
  route();
}

window.addEventListener("hashchange", route);
boot();
