// rollboot status page: one EventSource, keyed rows, bars placed by CSS
// variables. An update touches only the cells and bars that changed; time
// passing changes three variables on the root, not the rows.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const root = document.documentElement.style;
  const groupsEl = $("groups");
  const groups = new Map(); // name -> {el, title, counts, slots, body, axis, rows: Map}
  const rows = new Map(); // host -> {el, group, cells, text, sig, search}
  let base = 0; // seconds: origin of the bars' variables
  let skew = 0; // server time - local time, ms
  let minStart = 0; // earliest bar, seconds since base
  let filter = "";
  const NOGROUP = "(not placed yet)";

  const serverNow = () => Date.now() + skew;
  const sec = (ms) => ms / 1000 - base;
  const clock = (ms) => new Date(ms).toLocaleTimeString([], { hour12: false });

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function setText(e, t) { if (e.textContent !== t) e.textContent = t; }

  // why is the host's reason, as `rollboot status` words it.
  function why(h) {
    const p = [];
    if (h.last_error && h.phase !== "idle") p.push(h.last_error);
    else if (h.waiting) p.push(h.waiting);
    if (h.cordoned) p.push("cordoned: node ineligible until its drain (next in line)");
    else if (h.no_cordon) p.push("no cordon: " + h.no_cordon);
    if (h.phase !== "idle" || h.reboot_required || h.manual_request) {
      if (h.reason) p.push("reboot: " + h.reason);
      else if (h.manual_request) p.push("reboot: manual request");
    }
    if (h.hold_reason && h.phase !== "idle") p.push("agent holds the reboot: " + h.hold_reason);
    if (h.failure) p.push("last failed attempt: " + h.failure.step + ": " + h.failure.message);
    if (h.detect_error) p.push("detection error: " + h.detect_error);
    if (h.discover_error) p.push("server roles unknown: " + h.discover_error);
    if (h.agent_missing) p.push(h.agent_missing);
    if (h.record_ignored) p.push(h.record_ignored);
    return p.join("; ");
  }

  function group(name) {
    let g = groups.get(name);
    if (g) return g;
    const d = el("details", "group");
    d.dataset.group = name;
    const s = el("summary");
    const title = el("span", "name", name);
    const slots = el("span", "slots");
    const counts = el("span", "counts");
    const states = el("span", "states");
    s.append(title, slots, counts, states);
    const body = el("div", "body");
    const axis = el("div", "axis");
    axis.append(el("span", "", "host"), el("span", "", "phase"), el("span", "", "since"), el("div", "ticks"), el("span", "", "why it waits"));
    body.append(axis);
    d.append(s, body);
    g = { el: d, name, slots, counts, states, body, ticks: axis.children[3], rows: new Map(), order: "" };
    groups.set(name, g);
    // Insert in name order.
    const after = [...groups.keys()].sort().find((n) => n > name && groups.get(n).el.isConnected);
    groupsEl.insertBefore(d, after ? groups.get(after).el : null);
    return g;
  }

  // STATES are the hosts' states the page tells apart, in the order counted.
  const STATES = [["out_of_service", "out of service"], ["queued", "queued"], ["needs_reboot", "needs a reboot"],
    ["held", "held"], ["stuck", "stuck"], ["idle", "idle"]];
  const stateText = new Map(STATES);
  const plural = (n, one, many) => n + " " + (n === 1 ? one : many);

  function row(host) {
    let r = rows.get(host);
    if (r) return r;
    const e = el("div", "row");
    e.dataset.host = host;
    // The reason: one line, the whole of it on demand (a click on it).
    const why = el("details", "why");
    const whyLine = el("summary");
    const whyFull = el("div", "full");
    why.append(whyLine, whyFull);
    whyFull.addEventListener("click", () => { why.open = false; });
    const state = el("span", "state");
    const phaseCell = el("span", "phasecell");
    const phase = el("span", "phase");
    phaseCell.append(phase, state);
    const cells = { host: el("span", "host", host), phase, state, phaseCell, since: el("span", "since"), tl: el("div", "tl"), why, whyLine, whyFull };
    cells.host.title = host;
    e.append(cells.host, phaseCell, cells.since, cells.tl, why);
    r = { el: e, group: null, cells, text: {}, sig: "", search: "" };
    rows.set(host, r);
    return r;
  }

  function updateRow(r, h, cycles, st, hold) {
    const c = r.cells;
    // A pending host awaiting approval shows that state, as `rollboot status` does.
    const phase = h.phase === "pending" && h.hold_kind === "awaiting_approval" ? "awaiting_approval" : h.phase, w = why(h);
    if (r.text.phase !== phase) { c.phase.textContent = phase; c.phase.className = "phase p-" + phase; r.el.dataset.phase = phase; r.text.phase = phase; }
    if (r.text.state !== st) {
      r.text.state = st;
      r.el.className = "row s-" + st; // the state's badge and colours follow it (style.css)
      setText(c.state, st === "idle" ? "" : stateText.get(st) || st);
    }
    if (r.text.hold !== hold) { r.text.hold = hold; c.state.title = hold ? "held by: " + hold : ""; }
    const since = h.since ? clock(Date.parse(h.since)) : "-";
    setText(c.since, since);
    if (r.text.why !== w) { setText(c.whyLine, w || "-"); setText(c.whyFull, w); c.why.classList.toggle("empty", !w); r.text.why = w; }
    const sig = JSON.stringify(cycles || []);
    if (sig !== r.sig) {
      r.sig = sig;
      c.tl.replaceChildren();
      for (const cy of cycles || []) {
        cy.bars.forEach((b, i) => {
          const bar = el("i", "bar k-" + b.kind);
          bar.dataset.kind = b.kind;
          const open = cy.open && i === cy.bars.length - 1 && !b.end;
          if (open) bar.classList.add("open");
          bar.style.setProperty("--s", sec(b.start).toFixed(3));
          if (!open) bar.style.setProperty("--e", sec(b.end).toFixed(3));
          const to = open ? "now" : clock(b.end);
          bar.title = b.kind + " " + clock(b.start) + " to " + to + (cy.outcome ? " (" + cy.outcome + ")" : "");
          c.tl.append(bar);
        });
      }
    }
    r.search = (h.host + " " + (r.group ? r.group.name : NOGROUP) + " " + phase + " " + (stateText.get(st) || "") + " " + (hold || "") + " " + w).toLowerCase();
  }

  function matches(r) { return !filter || r.search.includes(filter); }

  function applyFilter() {
    for (const r of rows.values()) r.el.hidden = !matches(r);
    for (const g of groups.values()) countGroup(g);
  }

  // stateCounts says how many hosts are in each state but idle, e.g. "2 held, 1 queued".
  function stateCounts(counts) {
    return STATES.filter(([k]) => k !== "idle" && counts[k]).map(([k, t]) => counts[k] + " " + t).join(", ");
  }

  function countGroup(g) {
    if (!g.data) return;
    let shown = 0;
    for (const r of g.rows.values()) if (!r.el.hidden) shown++;
    const phases = Object.entries(g.data.phases).sort().map(([p, n]) => n + " " + p).join(", ");
    const states = stateCounts(g.data.states || {});
    const f = filter ? " — " + shown + " of " + g.data.hosts + " match" : "";
    setText(g.counts, plural(g.data.hosts, "host", "hosts") + (phases ? ": " + phases : "") + f);
    setText(g.states, states);
    if (g.states.hidden !== !states) g.states.hidden = !states;
  }

  function summary(d) {
    const v = d.status;
    const fields = [
      ["Leader", d.coordinator],
      ["This process", d.leader],
      ["Served by", d.process || "-"],
      ["Policy", d.policy],
      ["Hosts", String(v.hosts.length)],
    ];
    const dl = $("summary");
    if (dl.children.length !== fields.length) {
      dl.replaceChildren(...fields.map(() => { const w = el("div"); w.append(el("dt"), el("dd")); return w; }));
    }
    fields.forEach(([k, val], i) => { setText(dl.children[i].children[0], k); setText(dl.children[i].children[1], val); });
    const head = $("headline");
    head.className = "headline r-" + d.rollout;
    head.dataset.rollout = d.rollout;
    setText(head, d.headline);
    const counts = $("counts");
    const parts = STATES.filter(([k]) => d.counts[k]).map(([k, t]) => {
      const e = el("span", "count s-" + k, d.counts[k] + " " + t);
      e.dataset.state = k;
      return e;
    });
    const held = Object.entries(d.held_by || {}).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    if (held.length) {
      const e = el("span", "heldby", "held by: " + held.map(([k, n]) => k + " " + n).join(", "));
      e.title = "the kinds of the holds: the reason label of rollboot_hosts_waiting (docs/metrics.md)";
      parts.push(e);
    }
    const sig = parts.map((e) => e.textContent).join("|");
    if (counts.dataset.sig !== sig) { counts.dataset.sig = sig; counts.replaceChildren(...parts); }
    const banner = $("banner");
    if (d.error) { banner.className = "banner"; setText(banner, "Cannot read the rollout's state (showing the last known): " + d.error); banner.hidden = false; }
    else if (v.paused) { banner.className = "banner paused"; setText(banner, "Rollout paused: " + (v.pause_reason || "-")); banner.hidden = false; }
    else banner.hidden = true;
    const probs = [];
    for (const b of v.ignored_records || []) probs.push("Ignored host record " + b.host + ": " + b.err);
    for (const p of v.control_problems || []) probs.push("Unreadable control entry: " + p);
    for (const b of v.plan_problems || []) probs.push("Partly unreadable plan " + b.host + ": " + b.err);
    if (v.agent_check) probs.push("Agents: " + v.agent_check);
    for (const w of v.waves || []) if (w.failed) probs.push("Wave held: group " + w.group + ", wave " + w.fingerprint.slice(0, 16) + ": canary " + w.failed);
    if (v.wave_problem) probs.push("Waves: " + v.wave_problem);
    if (v.mixed_versions) probs.push("Agents run different versions: " + v.mixed_versions.map((c) => c.version + " (" + c.hosts + ")").join(", "));
    const pe = $("problems");
    setText(pe, probs.join("\n"));
    pe.hidden = probs.length === 0;
  }

  function render(d) {
    skew = d.now - Date.now();
    if (!base) base = Math.floor(d.now / 1000);
    summary(d);
    const byHost = new Map();
    minStart = Infinity;
    for (const c of d.timeline) {
      if (!byHost.has(c.host)) byHost.set(c.host, []);
      byHost.get(c.host).push(c);
      minStart = Math.min(minStart, sec(c.bars[0].start));
    }
    const seenGroups = new Set();
    for (const gd of d.groups) {
      const g = group(gd.name);
      g.data = gd;
      seenGroups.add(gd.name);
      const lim = gd.slots_limit === undefined ? "?" : String(gd.slots_limit);
      setText(g.slots, "slots " + gd.slots_used + " / " + lim);
      g.slots.classList.toggle("full", gd.slots_limit !== undefined && gd.slots_used >= gd.slots_limit);
      g.slots.title = gd.slots_limit === undefined ? "slots in use; the limit is not recorded yet (the leader records it after its first pass)" : "slots in use / limit";
    }
    const seen = new Set();
    for (const h of d.status.hosts) {
      seen.add(h.host);
      const r = row(h.host);
      const info = (d.rows || {})[h.host] || {};
      const gname = info.group || h.group || NOGROUP;
      const g = group(gname);
      if (r.group !== g) {
        if (r.group) r.group.rows.delete(h.host);
        g.rows.set(h.host, r);
        r.group = g;
      }
      updateRow(r, h, byHost.get(h.host), info.state || "idle", info.hold || "");
      r.el.hidden = !matches(r);
    }
    for (const [host, r] of rows) {
      if (!seen.has(host)) { r.el.remove(); r.group.rows.delete(host); rows.delete(host); }
    }
    for (const [name, g] of groups) {
      if (!seenGroups.has(name) && g.rows.size === 0) { g.el.remove(); groups.delete(name); continue; }
      const order = [...g.rows.keys()].sort().join("\n");
      if (order !== g.order) { // rows came, went or moved: put them in name order
        g.order = order;
        for (const h of [...g.rows.keys()].sort()) g.body.append(g.rows.get(h).el);
      }
      if (!g.opened) { g.opened = true; g.el.open = g.rows.size <= 200; }
      countGroup(g);
    }
    tick();
  }

  // tick moves the time axis: the three variables every bar is placed by.
  function tick() {
    const now = sec(serverNow());
    const range = Number($("range").value);
    let t0 = range > 0 ? now - range : (isFinite(minStart) ? minStart : now - 60);
    if (now - t0 < 10) t0 = now - 10;
    const span = (now - t0) * 1.02;
    root.setProperty("--now", now.toFixed(3));
    root.setProperty("--t0", t0.toFixed(3));
    root.setProperty("--span", span.toFixed(3));
    for (const g of groups.values()) {
      if (!g.el.open) continue;
      if (!g.ticks.children.length) {
        for (let i = 0; i < 5; i++) {
          const s = el("span");
          s.style.left = (10 + i * 20) + "%";
          g.ticks.append(s);
        }
      }
      for (let i = 0; i < 5; i++) setText(g.ticks.children[i], clock((t0 + span * (0.1 + i * 0.2) + base) * 1000));
    }
  }

  // The live connection: EventSource, reconnected with backoff when it fails or
  // goes quiet (the server sends a ping every 15 seconds).
  let es = null, backoff = 1000, lastHeard = 0, retryTimer = 0;
  function conn(state, text) { const c = $("conn"); c.className = "conn " + state; setText(c, text); }
  function connect() {
    clearTimeout(retryTimer);
    if (es) es.close();
    conn("connecting", "connecting…");
    es = new EventSource("events");
    lastHeard = Date.now();
    es.onopen = () => { lastHeard = Date.now(); };
    es.onmessage = (ev) => {
      lastHeard = Date.now();
      backoff = 1000;
      conn("live", "live");
      render(JSON.parse(ev.data));
    };
    es.addEventListener("ping", () => { lastHeard = Date.now(); });
    es.onerror = () => reconnect();
  }
  function reconnect() {
    if (es) { es.close(); es = null; }
    conn("connecting", "reconnecting in " + Math.round(backoff / 1000) + "s…");
    clearTimeout(retryTimer);
    retryTimer = setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 30000);
  }
  setInterval(() => {
    tick();
    if (es && Date.now() - lastHeard > 45000) reconnect();
  }, 1000);

  let filterTimer = 0;
  $("filter").addEventListener("input", (e) => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => { filter = e.target.value.trim().toLowerCase(); applyFilter(); }, 120);
  });
  $("range").addEventListener("change", tick);
  $("collapse").addEventListener("click", () => { for (const g of groups.values()) g.el.open = false; });
  $("expand").addEventListener("click", () => { for (const g of groups.values()) g.el.open = true; tick(); });
  groupsEl.addEventListener("toggle", tick, true);
  connect();
})();
