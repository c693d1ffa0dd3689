/* settled review: one script for every page; the page's data is the JSON in #data. */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("data").textContent);
  var M = D.model || null;
  var SEARCH = window.SETTLED_SEARCH;

  function $(sel, root) { return (root || document).querySelector(sel); }
  function $$(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
  /* el("div", {class: "x"}, child, "text", ...): DOM built with text nodes, never innerHTML. */
  function el(tag, attrs) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (attrs[k] === null || attrs[k] === undefined || attrs[k] === false) return;
      if (k === "onclick") e.addEventListener("click", attrs[k]);
      else e.setAttribute(k, attrs[k] === true ? "" : attrs[k]);
    });
    for (var i = 2; i < arguments.length; i++) add(e, arguments[i]);
    return e;
  }
  function add(parent, child) {
    if (arguments.length > 2) {
      for (var j = 1; j < arguments.length; j++) add(parent, arguments[j]);
      return;
    }
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { add(parent, c); }); return; }
    parent.appendChild(typeof child === "string" || typeof child === "number"
      ? document.createTextNode(String(child)) : child);
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  function code(text) { return el("code", {}, text); }
  function ruleLinks(rules) {
    return el("span", {class: "rules"}, (rules || []).map(function (r) {
      return [el("a", {href: "rules.html#" + r, title: "rule " + r}, r), " "];
    }));
  }

  /* ---------------------------------------------------------------- search */
  (function search() {
    var box = $("#search-box"), list = $("#search-results"), active = -1;
    if (!box) return;
    function render() {
      var q = box.value.trim().toLowerCase();
      clear(list); active = -1;
      if (!q) { list.hidden = true; return; }
      if (!SEARCH) {  /* never an empty answer for a missing index */
        list.appendChild(el("li", {}, el("a", {}, "the search index (search.js beside this page) did not load")));
        list.hidden = false;
        return;
      }
      var hits = SEARCH.filter(function (r) {
        return r[0].toLowerCase().indexOf(q) >= 0 || r[1].toLowerCase().indexOf(q) >= 0;
      });
      hits.sort(function (a, b) {
        var ea = a[0].toLowerCase().indexOf(q) === 0 ? 0 : 1, eb = b[0].toLowerCase().indexOf(q) === 0 ? 0 : 1;
        return ea - eb;
      });
      hits.slice(0, 40).forEach(function (r) {
        list.appendChild(el("li", {role: "option"}, el("a", {href: r[2]}, r[0], el("span", {class: "what"}, r[1]))));
      });
      if (!hits.length) list.appendChild(el("li", {}, el("a", {}, "nothing matches " + JSON.stringify(box.value))));
      list.hidden = false;
    }
    function move(delta) {
      var links = $$("a[href]", list);
      if (!links.length) return;
      if (active >= 0) links[active].classList.remove("active");
      active = (active + delta + links.length) % links.length;
      links[active].classList.add("active");
      links[active].scrollIntoView({block: "nearest"});
    }
    box.addEventListener("input", render);
    box.addEventListener("keydown", function (ev) {
      if (ev.key === "ArrowDown") { move(1); ev.preventDefault(); }
      else if (ev.key === "ArrowUp") { move(-1); ev.preventDefault(); }
      else if (ev.key === "Enter") {
        var links = $$("a[href]", list);
        if (links.length) links[Math.max(active, 0)].click();
      } else if (ev.key === "Escape") { box.value = ""; render(); }
    });
    list.addEventListener("click", function () { list.hidden = true; });
    document.addEventListener("click", function (ev) { if (!$("#search").contains(ev.target)) list.hidden = true; });
    document.addEventListener("keydown", function (ev) {
      if (ev.key === "/" && document.activeElement !== box && !/INPUT|SELECT|TEXTAREA/.test(document.activeElement.tagName)) {
        box.focus(); ev.preventDefault();
      }
    });
  })();

  /* ---------------------------------------------------------------- document pages */
  if (D.page === "rules") { rulesPage(); window.__settledReady = performance.now(); document.body.setAttribute("data-ready", "1"); return; }
  if (D.page === "index") { indexPage(); window.__settledReady = performance.now(); document.body.setAttribute("data-ready", "1"); return; }

  function rulesPage() {
    var doc = $("#doc");
    var linked = D.rules.filter(function (r) { return r.transitions.length || r.properties.length; }).length;
    var flagged = D.rules.filter(function (r) { return r.flag; });
    add(doc, el("h1", {}, "Rule index"));
    add(doc, el("p", {}, "Every rule of docs/PROTOCOL.md with the transitions, invariants and step properties that cite it, the catalogue mutants that break it and the tests marked with it. ",
      linked + " of " + D.rules.length + " rules link to a transition or a property; " +
      (flagged.length ? flagged.length + " flagged: " + flagged.map(function (r) { return r.rule + " (" + r.flag + ")"; }).join(", ") : "none flagged") + "."));
    if (!D.inputs.mutants) add(doc, el("p", {class: "notice"}, "No mutants report was given (settled review --mutants REPORT.json): each mutant's kill status is NOT SHOWN."));
    D.rules.forEach(function (r) {
      function list(items, make) { return items.length ? el("ul", {}, items.map(function (x) { return el("li", {}, make(x)); })) : el("p", {class: "muted"}, "none"); }
      var mutants = list(r.mutants, function (m) {
        var status;
        if (!m.run) status = el("span", {class: "badge"}, D.inputs.mutants ? "not in the mutants report" : "not run");
        else if (m.run.killed) status = el("span", {class: "badge good"}, "killed by " + (m.run.killed_by || "?") + (m.run.steps !== null && m.run.steps !== undefined ? " in " + m.run.steps + " steps" : ""));
        else status = el("span", {class: "badge bad"}, "SURVIVED");
        return [code(m.name), " ", status, " ", el("span", {class: "muted"}, m.machine + ": " + m.description),
          m.counterexample ? [" ", el("a", {href: m.counterexample, class: "play"}, "▶ play its counterexample")] : null];
      });
      add(doc, el("section", {class: "rule", id: r.rule},
        el("h2", {}, r.rule, " ", r.flag ? el("span", {class: "badge flag"}, r.flag === "gap" ? "gap: nothing behind it" : "backed by tests only") : null),
        el("p", {}, r.text),
        el("div", {class: "cols"},
          el("div", {}, el("h4", {}, "transitions"), list(r.transitions, function (t) { return el("a", {href: t.href, class: "target"}, t.text); })),
          el("div", {}, el("h4", {}, "invariants and step properties"), list(r.properties, function (t) { return el("a", {href: t.href, class: "target"}, t.text); })),
          el("div", {}, el("h4", {}, "mutants that break it"), mutants),
          el("div", {}, el("h4", {}, "tests"), list(r.tests, function (t) { return code(t); })))));
    });
  }

  function indexPage() {
    var doc = $("#doc");
    add(doc, el("h1", {}, "settled: protocol review"));
    add(doc, el("p", {}, "One page per machine and per system: click a state or an edge (or reach it with Tab and Enter) for its transitions, guards, effects, rules and properties. The ",
      el("a", {href: "rules.html"}, "rule index"), " links each rule of PROTOCOL.md to what implements and checks it."));
    var inputs = [];
    inputs.push(D.inputs.verify ? "coverage from a verify report" : "no verify report (coverage not measured)");
    inputs.push(D.inputs.mutants ? "kill status from a mutants report" : "no mutants report (kill status not shown)");
    inputs.push(D.inputs.counterexamples.length + " counterexample(s) embedded");
    add(doc, el("p", {class: "muted"}, "Generated with: " + inputs.join("; ") + "."));
    add(doc, el("h2", {}, "Machines"));
    add(doc, el("div", {class: "summary-grid"}, D.machines.map(function (m) {
      return el("div", {class: "card"}, el("div", {class: "head"}, el("a", {href: m.name + ".html"}, m.name)),
        el("p", {}, m.meaning), el("p", {class: "muted"}, m.states + " states, " + m.transitions + " transitions; rules " + m.rules.join(", ")));
    })));
    add(doc, el("h2", {}, "Systems"));
    add(doc, el("div", {class: "summary-grid"}, D.systems.map(function (s) {
      return el("div", {class: "card"}, el("div", {class: "head"}, el("a", {href: s.name + ".html"}, s.name)),
        el("p", {}, s.meaning), el("p", {class: "muted"}, s.instances + " instances of " + s.machine));
    })));
    add(doc, el("h2", {}, "Counterexamples"));
    if (!D.traces.length) add(doc, el("p", {class: "muted"}, "None embedded (settled review --counterexamples DIR). Each diagram page's counterexample tab also opens an ITF file from disk."));
    else add(doc, el("ul", {}, D.traces.map(function (t) {
      return el("li", {}, el("a", {href: t.model + ".html#cx=" + encodeURIComponent(t.file)}, t.file), " ", el("span", {class: "muted"}, t.model + ", " + (t.states - 1) + " steps, " + t.status));
    })));
  }

  /* ---------------------------------------------------------------- diagram pages */
  var svg = $("#viewport svg"), viewport = $("#viewport"), status = $("#status");
  var isMachine = M.kind === "machine";
  var items = $$("g.item", svg);
  var nodes = {};
  $$("g.node.item", svg).forEach(function (g) { nodes[g.getAttribute("data-node")] = g; });
  var edgeGroups = $$("g.edge.item", svg);
  function words(g) { return (g.getAttribute("data-words") || "").split(" "); }

  /* zoom and pan over the viewBox */
  var base = svg.getAttribute("viewBox").split(/\s+/).map(Number);
  var vb = base.slice();
  function setVB() { svg.setAttribute("viewBox", vb.map(function (x) { return x.toFixed(2); }).join(" ")); }
  function zoom(f, cx, cy) {
    var r = svg.getBoundingClientRect();
    var px = cx === undefined ? 0.5 : (cx - r.left) / r.width, py = cy === undefined ? 0.5 : (cy - r.top) / r.height;
    var w = vb[2] * f, h = vb[3] * f;
    if (w > base[2] * 4 || w < base[2] / 12) return;
    vb = [vb[0] + (vb[2] - w) * px, vb[1] + (vb[3] - h) * py, w, h];
    setVB();
  }
  function fit() { vb = base.slice(); setVB(); }
  viewport.setAttribute("title", "drag to pan, wheel to scroll, Ctrl+wheel or + and − to zoom, 0 to fit");
  $("#zoom-in").addEventListener("click", function () { zoom(0.8); });
  $("#zoom-out").addEventListener("click", function () { zoom(1.25); });
  $("#zoom-fit").addEventListener("click", fit);
  /* the wheel scrolls (shift: sideways); with Ctrl or Cmd it zooms around the pointer */
  viewport.addEventListener("wheel", function (ev) {
    ev.preventDefault();
    if (ev.ctrlKey || ev.metaKey) return zoom(ev.deltaY > 0 ? 1.15 : 0.87, ev.clientX, ev.clientY);
    var r = svg.getBoundingClientRect(), s = Math.max(vb[2] / r.width, vb[3] / r.height);
    var d = (ev.deltaMode === 1 ? 16 : 1) * s;
    if (ev.shiftKey) vb[0] += (ev.deltaY || ev.deltaX) * d; else { vb[0] += ev.deltaX * d; vb[1] += ev.deltaY * d; }
    setVB();
  }, {passive: false});
  /* the first view fills the width (the pictures are drawn to be read at that width) */
  function fitWidth() {
    var r = viewport.getBoundingClientRect();
    if (r.width < 10 || r.height < 10) return fit();
    var scale = Math.min(r.width / base[2], 1.2);  /* screen pixels per diagram unit */
    var w = r.width / scale, h = r.height / scale;
    vb = [base[0] - (w - base[2]) / 2, h < base[3] ? base[1] : base[1] - (h - base[3]) / 2, w, h];
    setVB();
  }
  /* bring an item into view when it is selected or played off screen */
  function ensureVisible(g) {
    if (!g) return;
    var b = g.getBBox(), m = g.getCTM(), root = svg.getCTM();
    if (!m || !root) return;
    var rel = root.inverse().multiply(m);
    var x = rel.a * b.x + rel.e, y = rel.d * b.y + rel.f, w = rel.a * b.width, h = rel.d * b.height;
    if (x >= vb[0] && y >= vb[1] && x + w <= vb[0] + vb[2] && y + h <= vb[1] + vb[3]) return;
    vb[0] = x + w / 2 - vb[2] / 2; vb[1] = y + h / 2 - vb[3] / 2;
    setVB();
  }
  var drag = null;
  viewport.addEventListener("pointerdown", function (ev) {
    drag = {x: ev.clientX, y: ev.clientY, vb: vb.slice(), moved: false};
  });
  window.addEventListener("pointermove", function (ev) {
    if (!drag) return;
    var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    drag.moved = true; viewport.classList.add("dragging");
    var r = svg.getBoundingClientRect();
    var s = Math.max(vb[2] / r.width, vb[3] / r.height);
    vb = [drag.vb[0] - dx * s, drag.vb[1] - dy * s, vb[2], vb[3]];
    setVB();
  });
  window.addEventListener("pointerup", function () {
    if (drag && drag.moved) { var stop = function (e) { e.stopPropagation(); window.removeEventListener("click", stop, true); }; window.addEventListener("click", stop, true); setTimeout(function () { window.removeEventListener("click", stop, true); }, 0); }
    drag = null; viewport.classList.remove("dragging");
  });
  document.addEventListener("keydown", function (ev) {
    if (/INPUT|SELECT|TEXTAREA/.test(document.activeElement.tagName)) return;
    if (ev.key === "+" || ev.key === "=") zoom(0.8);
    else if (ev.key === "-") zoom(1.25);
    else if (ev.key === "0") fit();
    else if (ev.key === "ArrowRight" && !$("#player").hidden) player.step(1);
    else if (ev.key === "ArrowLeft" && !$("#player").hidden) player.step(-1);
  });

  /* tabs */
  function showTab(name) {
    $$("#tabs button").forEach(function (b) { b.setAttribute("aria-selected", b.getAttribute("data-tab") === name ? "true" : "false"); });
    ["details", "player", "coverage"].forEach(function (t) { $("#" + t).hidden = t !== name; });
  }
  $$("#tabs button").forEach(function (b) { b.addEventListener("click", function () { showTab(b.getAttribute("data-tab")); }); });

  /* selection */
  function unselect() {
    items.forEach(function (g) { g.classList.remove("selected", "related"); });
    svg.classList.remove("dim");
  }
  function mark(list, cls) { list.forEach(function (g) { if (g) g.classList.add(cls); }); if (list.length) svg.classList.add("dim"); }
  function target(t, src) { return t.dest === null ? src : t.dest; }
  function edgeOf(src, dst, trigger) {
    if (src === dst) return null;
    return edgeGroups.filter(function (g) {
      return g.getAttribute("data-src") === src && g.getAttribute("data-dst") === dst && words(g).indexOf(trigger) >= 0;
    })[0] || null;
  }

  function transitionCard(t, opts) {
    opts = opts || {};
    var srcs = t.source ? t.source.join(" | ") : "";
    var where = t.source ? [srcs, " → ", t.dest === null ? "(same)" : t.dest] : [t.what];
    var guardList = t.guards.length ? el("ul", {}, t.guards.map(function (g) {
      return el("li", {}, code(g.name), ": ", g.text,
        g.parts.length ? el("span", {class: "muted"}, " (all of: " + g.parts.join(", ") + ")") : null,
        g.cases.length ? el("span", {class: "muted"}, " (any of: " + g.cases.join(", ") + ")") : null,
        g.bound ? el("span", {class: "badge"}, "model bound") : null);
    })) : el("span", {class: "muted"}, "none");
    var params = t.params.length ? t.params.map(function (p) { return el("div", {}, code(p.name), " ∈ {" + p.domain.join(", ") + "}"); }) : null;
    var cov = opts.coverage;
    return el("div", {class: "card k-" + (t.kind || "worker") + (cov === false ? " unfired" : ""), "data-trigger": t.trigger},
      el("div", {class: "head"}, code(t.trigger), " ", el("span", {class: "muted"}, where),
        cov === false ? el("span", {class: "badge warn"}, "never fired") : cov === true ? el("span", {class: "badge good"}, "fired") : null),
      el("div", {}, t.meaning),
      el("dl", {},
        el("dt", {}, "guard"), el("dd", {}, t.guard_text !== undefined && t.guard_text !== "" ? el("div", {class: "guard-text"}, t.guard_text) : null, guardList),
        el("dt", {}, "effect"), el("dd", {}, t.effect),
        params ? [el("dt", {}, "params"), el("dd", {}, params)] : null,
        el("dt", {}, "actor"), el("dd", {}, t.actor + (t.refusable ? ", refusable" : "")),
        el("dt", {}, "rules"), el("dd", {}, ruleLinks(t.rules))));
  }
  function propertyCard(p) {
    return el("div", {class: "card", "data-property": p.name}, el("div", {class: "head"}, code(p.name), " ", el("span", {class: "muted"}, p.kind)),
      el("div", {}, p.text), el("div", {}, "rules: ", ruleLinks(p.rules)));
  }
  function edgeFired(src, dst, trigger) {
    var c = D.coverage;
    if (!c || !c.measured || !c.edges) return undefined;
    var e = c.edges.filter(function (x) { return x.src === src && x.dst === dst && x.trigger === trigger; })[0];
    return e ? e.fired : undefined;
  }
  function resolved(ok, what) {
    document.body.setAttribute("data-resolved", ok ? "ok" : "missing");
    if (!ok) { var d = clear($("#details")); add(d, el("p", {class: "error"}, "Not found on this page: " + what)); showTab("details"); }
  }
  function panel(title, sub, parts) {
    var d = clear($("#details"));
    add(d, el("h2", {}, title), sub ? el("div", {class: "sub"}, sub) : null, parts);
    showTab("details");
    document.body.setAttribute("data-resolved", "ok");
  }

  /* machine pages */
  function stateInfo(name) {
    var s = M.states.filter(function (x) { return x.name === name; })[0];
    var out = [], into = [], loops = [];
    M.transitions.forEach(function (t) {
      t.source.forEach(function (src) {
        var dst = target(t, src);
        if (src === name && dst === name) loops.push([t, src]);
        else if (src === name) out.push([t, src]);
        else if (dst === name) into.push([t, src]);
      });
    });
    return {state: s, out: out, into: into, loops: loops};
  }
  function selectState(name) {
    var info = stateInfo(name), s = info.state;
    if (!s) return resolved(false, "state " + name);
    unselect();
    mark([nodes[name]], "selected");
    ensureVisible(nodes[name]);
    var rel = [];
    info.out.concat(info.into).forEach(function (p) { rel.push(edgeOf(p[1], target(p[0], p[1]), p[0].trigger)); });
    mark(rel, "related");
    var rules = {};
    info.out.concat(info.into, info.loops).forEach(function (p) { p[0].rules.forEach(function (r) { rules[r] = 1; }); });
    var props = M.properties.filter(function (p) { return p.states.indexOf(name) >= 0; });
    props.forEach(function (p) { p.rules.forEach(function (r) { rules[r] = 1; }); });
    function cards(list) {
      return list.length ? list.map(function (p) { return transitionCard(p[0], {coverage: edgeFired(p[1], target(p[0], p[1]), p[0].trigger)}); }) : el("p", {class: "muted"}, "none");
    }
    var cov = D.coverage, covPart;
    if (!cov) covPart = el("p", {class: "muted"}, "No verify report was given: coverage not measured.");
    else if (!cov.measured) covPart = el("p", {class: "notice"}, "Coverage not measured: " + cov.why);
    else {
      var mine = cov.edges.filter(function (e) { return e.src === name || e.dst === name; });
      var never = mine.filter(function (e) { return !e.fired; });
      covPart = el("p", {}, (mine.length - never.length) + " of " + mine.length + " edges in, out and around this state fired in the last verify's campaign",
        never.length ? [": never fired ", never.map(function (e) { return code(e.trigger + ": " + e.src + " → " + e.dst); })] : ".");
    }
    panel(name, [s.initial ? el("span", {class: "badge initial"}, "initial") : null, s.unknown ? el("span", {class: "badge unknown"}, "unknown") : null, s.terminal ? el("span", {class: "badge terminal"}, "terminal") : null], [
      el("p", {}, s.meaning),
      el("div", {}, "rules: ", ruleLinks(Object.keys(rules).sort(ruleOrder))),
      el("h3", {}, "out (" + info.out.length + ")"), el("div", {class: "out"}, cards(info.out)),
      el("h3", {}, "in (" + info.into.length + ")"), el("div", {class: "in"}, cards(info.into)),
      el("h3", {}, "stays (" + info.loops.length + ")"), el("div", {class: "loops"}, cards(info.loops)),
      el("h3", {}, "properties naming it (" + props.length + ")"), props.length ? props.map(propertyCard) : el("p", {class: "muted"}, "none"),
      el("h3", {}, "coverage"), covPart]);
  }
  function ruleOrder(a, b) {
    var o = "QTMLWARV", ha = a.replace(/\d+$/, ""), hb = b.replace(/\d+$/, "");
    return (o.indexOf(ha) - o.indexOf(hb)) || (parseInt(a.slice(ha.length), 10) - parseInt(b.slice(hb.length), 10));
  }
  function selectTransitions(list, title, sub) {
    unselect();
    var rel = [];
    list.forEach(function (t) { t.source.forEach(function (src) { var d = target(t, src); rel.push(edgeOf(src, d, t.trigger)); if (src === d) rel.push(nodes[src]); }); });
    mark(rel.filter(Boolean), "selected");
    panel(title, sub, list.map(function (t) { return transitionCard(t); }));
  }
  function selectEdge(g) {
    var src = g.getAttribute("data-src"), dst = g.getAttribute("data-dst");
    if (!isMachine) return selectSystemEdge(g);
    var list = M.transitions.filter(function (t) { return t.source.indexOf(src) >= 0 && target(t, src) === dst; });
    unselect(); mark([g], "selected");
    panel(src + " → " + dst, el("span", {class: "muted"}, list.length + " transition(s)"),
      list.map(function (t) { return transitionCard(t, {coverage: edgeFired(src, dst, t.trigger)}); }));
  }

  /* system pages */
  function stepCards(list) { return list.length ? list.map(function (t) { return transitionCard(t); }) : el("p", {class: "muted"}, "none"); }
  function mutexCard() {
    var x = M.mutex;
    return el("div", {class: "card", id: "mutex-card"}, el("div", {class: "head"}, "mutex ", code(x.variable), " ", ruleLinks(x.rules)),
      el("p", {}, x.text + ". An instance holds it while its " + x.flag + " is true; a step of any other instance with one of these triggers waits until it is free: "),
      el("p", {}, x.takes.map(function (t) { return code(t + " "); })));
  }
  function varTable(vars) {
    return el("table", {class: "vars"}, el("tr", {}, el("th", {}, "variable"), el("th", {}, "domain"), el("th", {}, "initial"), el("th", {}, "meaning")),
      vars.map(function (v) { return el("tr", {"data-var": v.name}, el("td", {}, code(v.name)), el("td", {}, v.domain), el("td", {}, v.initial), el("td", {}, v.meaning + (v.ghost ? " (specification only)" : "") + (v.shared ? " (shared by every instance)" : ""))); }));
  }
  function selectSystemNode(name) {
    unselect(); mark([nodes[name]], "selected");
    if (name === "instances") {
      return panel(M.machine + " × " + M.instances, el("a", {href: M.machine + ".html"}, "open the " + M.machine + " machine"), [
        el("p", {}, M.meaning),
        el("h3", {}, "shared by every instance"), M.shared.length ? el("p", {}, M.shared.map(function (n) { return code(n + " "); })) : el("p", {class: "muted"}, "none"),
        el("h3", {}, "synchronised triggers"), M.sync.length ? M.sync.map(syncCard) : el("p", {class: "muted"}, "none"),
        el("h3", {}, "refinements"), stepCards(M.steps.filter(function (s) { return s.what === "refinement"; })),
        el("h3", {}, "bound parameters"), M.bind.length ? M.bind.map(function (b) { return el("p", {}, code(M.machine + "." + b.param), " is " + b.text + " (reads " + b.reads.join(", ") + ")"); }) : el("p", {class: "muted"}, "none"),
        M.mutex ? [el("h3", {}, "mutex"), mutexCard()] : null,
        el("h3", {}, "machine variables"), varTable(M.machine_variables)]);
    }
    if (name === "system_vars") {
      return panel("system variables", null, [varTable(M.variables), el("h3", {}, "steps over them"), stepCards(M.steps),
        M.mutex ? [el("h3", {}, "mutex"), mutexCard()] : null]);
    }
    if (name === "invariants") return panel("system invariants", null, M.properties.map(propertyCard));
    if (name.indexOf("actor_") === 0) {
      var actor = name.slice(6);
      return panel(actor, el("span", {class: "muted"}, "system steps this actor takes"), stepCards(M.steps.filter(function (s) { return s.actor === actor && s.what === "system step"; })));
    }
    if (name.indexOf("sync_") === 0) {
      var s = M.sync.filter(function (x) { return "sync_" + x.trigger === name; })[0];
      return panel(s.trigger, el("span", {class: "muted"}, "synchronised: one step on every instance where it is enabled"), syncCard(s));
    }
    resolved(false, name);
  }
  function syncCard(s) {
    return el("div", {class: "card", "data-trigger": s.trigger}, el("div", {class: "head"}, el("a", {href: M.machine + ".html#" + s.trigger}, s.trigger), " ", el("span", {class: "muted"}, "every instance at once")),
      el("div", {}, s.meaning), el("div", {}, "actor: " + s.actor + "; rules: ", ruleLinks(s.rules)));
  }
  function selectSystemEdge(g) {
    var src = g.getAttribute("data-src"), w = words(g);
    unselect(); mark([g], "selected");
    if (src.indexOf("sync_") === 0) return selectSystemNode(src);
    var steps = M.steps.filter(function (s) { return w.indexOf(s.trigger) >= 0; });
    var parts = stepCards(steps);
    if (w.indexOf("mutex") >= 0 && M.mutex) parts = mutexCard();
    if (w.indexOf("binds") >= 0) parts = M.bind.map(function (b) { return el("p", {}, code(M.machine + "." + b.param), " is " + b.text); });
    panel(src + " → " + g.getAttribute("data-dst"), null, parts);
  }

  function selectItem(g) {
    if (g.classList.contains("node")) {
      var n = g.getAttribute("data-node");
      if (isMachine) selectState(n); else selectSystemNode(n);
    } else selectEdge(g);
  }
  items.forEach(function (g) {
    g.addEventListener("click", function (ev) { ev.stopPropagation(); selectItem(g); });
    g.addEventListener("keydown", function (ev) { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); selectItem(g); } });
  });

  /* hash routes: #state=S, #guard=G, #var=V, #cx=FILE, #mutex, #NAME (trigger, step or property) */
  function route() {
    var h = decodeURIComponent(location.hash.slice(1));
    if (!h) { overviewPanel(); return; }
    var eq = h.indexOf("="), key = eq > 0 ? h.slice(0, eq) : "", val = eq > 0 ? h.slice(eq + 1) : h;
    if (key === "cx") { showTab("player"); return player.openNamed(val); }
    if (key === "state") {
      if (isMachine) return selectState(val);
      if (nodes[val]) return selectSystemNode(val);
      return resolved(false, "state " + val);
    }
    if (key === "guard") {
      var withGuard = (M.transitions || M.steps).filter(function (t) { return t.guards.some(function (g) { return g.name === val; }); });
      if (!withGuard.length) return resolved(false, "guard " + val);
      return isMachine ? selectTransitions(withGuard, "guard " + val, withGuard[0].guards.filter(function (g) { return g.name === val; })[0].text) : panel("guard " + val, null, stepCards(withGuard));
    }
    if (key === "var") {
      var vars = (M.variables || []).concat(M.machine_variables || []).filter(function (v) { return v.name === val; });
      if (!vars.length) return resolved(false, "variable " + val);
      var users = (M.transitions || M.steps).filter(function (t) {
        return t.guards.some(function (g) { return g.reads.indexOf(val) >= 0; }) || new RegExp("\\b" + val + "\\b").test(t.effect);
      });
      unselect();
      return panel(val, el("span", {class: "muted"}, "variable"), [varTable(vars.slice(0, 1)), el("h3", {}, "read by a guard or written by an effect (" + users.length + ")"), stepCards(users)]);
    }
    if (h === "mutex" && M.mutex) { selectSystemNode("instances"); return panel("mutex " + M.mutex.variable, null, mutexCard()); }
    var props = M.properties.filter(function (p) { return p.name === h; });
    if (props.length) {
      unselect();
      mark(props[0].states.map(function (s) { return nodes[s]; }).filter(Boolean), "related");
      if (!isMachine && nodes.invariants) mark([nodes.invariants], "selected");
      return panel(h, el("span", {class: "muted"}, props[0].kind), propertyCard(props[0]));
    }
    if (isMachine) {
      var list = M.transitions.filter(function (t) { return t.trigger === h; });
      if (list.length) return selectTransitions(list, h, el("span", {class: "muted"}, list.length + " transition(s) with this trigger"));
    } else {
      var steps = M.steps.filter(function (s) { return s.trigger === h; });
      var sync = M.sync.filter(function (s) { return s.trigger === h; });
      if (steps.length || sync.length) {
        unselect();
        mark(edgeGroups.filter(function (g) { return words(g).indexOf(h) >= 0; }).concat(sync.length ? [nodes["sync_" + h]] : []), "selected");
        return panel(h, null, [stepCards(steps), sync.map(syncCard)]);
      }
    }
    resolved(false, h);
  }
  function overviewPanel() {
    unselect();
    var parts = [el("p", {}, M.meaning)];
    if (isMachine) {
      parts.push(el("p", {class: "muted"}, M.states.length + " states, " + M.transitions.length + " transitions. Click a state or an edge, or Tab to it and press Enter. Drag or scroll to pan; Ctrl+wheel or + and − to zoom, 0 to fit."));
      parts.push(el("h3", {}, "states"), el("ul", {}, M.states.map(function (s) { return el("li", {}, el("a", {href: "#state=" + s.name}, s.name), ": ", el("span", {class: "muted"}, s.meaning)); })));
      parts.push(el("h3", {}, "variables"), varTable(M.variables));
    } else {
      parts.push(el("p", {class: "muted"}, M.instances + " instances of ", el("a", {href: M.machine + ".html"}, M.machine), ". Click a box or an edge for the steps behind it."));
      parts.push(el("h3", {}, "system variables"), varTable(M.variables));
    }
    parts.push(el("h3", {}, "properties"), M.properties.length ? M.properties.map(propertyCard) : el("p", {class: "muted"}, "none"));
    panel(M.name, null, parts);
  }

  /* ---------------------------------------------------------------- coverage layer */
  (function coverage() {
    var c = D.coverage, box = $("#coverage"), toggle = $("#coverage-toggle");
    if (!c) {
      toggle.disabled = true; toggle.parentNode.title = "no verify report was given";
      add(box, el("p", {class: "notice"}, "No verify report was given (settled review --verify REPORT.json, from settled verify --json): coverage NOT MEASURED."));
      return;
    }
    if (!c.measured) { toggle.disabled = true; add(box, el("p", {class: "notice"}, "Coverage NOT MEASURED: " + c.why)); return; }
    toggle.addEventListener("change", function () { document.body.classList.toggle("coverage-on", toggle.checked); });
    if (!isMachine) {
      add(box, el("h2", {}, "system coverage"),
        el("p", {}, "explored " + c.explore.states + " states (" + c.explore.states_unreduced + " unreduced), " + c.explore.edges + " edges; " + (c.explore.ok ? "no finding" : "findings: " + c.explore.findings.join(", "))));
      if (!c.lockstep.checked) add(box, el("p", {class: "notice"}, "System lockstep NOT CHECKED: " + c.lockstep.why));
      else add(box, el("p", {}, "lockstep: " + c.lockstep.examples + " runs, " + c.lockstep.steps + " steps, fired " + c.lockstep.fired + " of " + c.lockstep.declared + " steps (" + c.lockstep.profile + " profile, seed " + c.lockstep.seed + ")"),
        c.lockstep.unfired.length ? [el("h3", {}, "never fired"), el("ul", {}, c.lockstep.unfired.map(function (u) { return el("li", {}, code(u)); }))] : null,
        c.lockstep.failure ? el("p", {class: "error"}, c.lockstep.failure) : null);
      toggle.disabled = true; toggle.parentNode.title = "the system diagram has no per-edge counts";
      return;
    }
    var fired = c.edges.filter(function (e) { return e.fired; }).length;
    edgeGroups.forEach(function (g) {
      var src = g.getAttribute("data-src"), dst = g.getAttribute("data-dst");
      var mine = c.edges.filter(function (e) { return e.src === src && e.dst === dst && words(g).indexOf(e.trigger) >= 0; });
      if (!mine.length) return;
      g.classList.add(mine.every(function (e) { return e.fired; }) ? "cov-fired" : "cov-unfired");
    });
    /* a guard alternative never taken: "trigger: a|b -> dest [guard: alternative]" */
    c.unfired_guard_alternatives.forEach(function (text) {
      var m = /^([^:]+): (.+?) -> (.+?) \[/.exec(text);
      if (!m) return;
      m[2].split("|").forEach(function (src) {
        var dst = m[3] === "(same)" ? src : m[3];
        if (src === dst && nodes[src]) { nodes[src].classList.add("cov-loop-alternative"); return; }
        edgeGroups.forEach(function (g) {
          if (g.getAttribute("data-src") === src && g.getAttribute("data-dst") === dst && words(g).indexOf(m[1]) >= 0) g.classList.add("cov-alternative");
        });
      });
    });
    Object.keys(nodes).forEach(function (s) {
      var never = c.edges.filter(function (e) { return e.src === s && e.dst === s && !e.fired; });
      if (!never.length) return;
      var g = nodes[s], b = g.getBBox();
      g.classList.add("cov-loop-unfired");
      var t = document.createElementNS("http://www.w3.org/2000/svg", "text");
      t.setAttribute("x", b.x + b.width + 3); t.setAttribute("y", b.y + 11); t.setAttribute("class", "cov-badge");
      t.textContent = "never fired: ↻ " + never.map(function (e) { return e.trigger; }).join(", ↻ ");
      g.appendChild(t);
    });
    function list(title, xs, what) {
      return [el("h3", {}, title + " (" + xs.length + ")"), xs.length ? el("ul", {}, xs.map(function (x) { return el("li", {}, code(x)); })) : el("p", {class: "muted"}, "none " + what)];
    }
    add(box, el("h2", {}, "last verify's coverage"),
      el("p", {}, "lockstep campaign: " + c.examples + " runs, " + c.steps + " steps, " + c.profile + " profile, seed " + c.seed + ", " + c.store + (c.ok ? "; passed" : "; FAILED")),
      c.failure ? el("p", {class: "error"}, c.failure) : null,
      el("p", {}, "edges fired: " + fired + " of " + c.edges.length + "; explorer: " + c.explore.states + " states" + (c.explore.ok ? ", no finding" : ", findings " + c.explore.findings.join(", ")) + "; trace check: " + c.trace_check.events + " events" + (c.trace_check.ok ? " accepted" : " NOT accepted")),
      el("p", {class: "muted"}, "Turn on the coverage layer (toolbar) to see never-fired edges in magenta on the diagram (dashed: an alternative of its guard never taken). Transitions, edges, guard alternatives, refusals and parameter values are listed below."),
      list("edges never fired", c.edges.filter(function (e) { return !e.fired; }).map(function (e) { return e.trigger + ": " + e.src + " → " + e.dst; }), "— every edge fired"),
      list("guard alternatives never taken", c.unfired_guard_alternatives, "— every alternative taken"),
      list("refusals never probed", c.unprobed_refusals, "— every probeable refusal asked for"),
      list("refusals never alone (no probe can single them out)", c.refusals_never_alone, ""),
      c.parameter_values == null ? el("p", {class: "muted"}, "parameter values: NOT MEASURED (the verify report predates them)")
        : list("parameter values never taken, of " + c.parameter_values + " declared", c.unfired_parameter_values, "— every value taken"),
      list("variables NOT CHECKED (unobservable to the adapter)", c.not_checked, ""));
  })();

  /* ---------------------------------------------------------------- counterexample player */
  var player = (function () {
    var box = $("#player"), trace = null, pos = 0, tags = [];
    function show(v) {
      if (v === null || v === undefined) return "—";
      if (typeof v !== "object") return typeof v === "string" ? v : String(v);
      if (Array.isArray(v)) return "[" + v.map(show).join(", ") + "]";
      if ("#bigint" in v) return v["#bigint"];
      if ("#tup" in v) return "(" + v["#tup"].map(show).join(", ") + ")";
      if ("#set" in v) return "{" + v["#set"].map(show).join(", ") + "}";
      if ("#map" in v) return "{" + v["#map"].map(function (p) { return show(p[0]) + ": " + show(p[1]); }).join(", ") + "}";
      if ("#unserializable" in v) return v["#unserializable"];
      if ("tag" in v && "value" in v) return v.tag === "Some" ? show(v.value) : v.tag === "None" ? "—" : v.tag + "(" + show(v.value) + ")";
      return "{" + Object.keys(v).sort().map(function (k) { return k + ": " + show(v[k]); }).join(", ") + "}";
    }
    function parse(doc, file) {
      if (!doc || !Array.isArray(doc.vars) || !Array.isArray(doc.states) || !doc.states.length) throw new Error(file + " is not an ITF trace ('vars' and a non-empty 'states' are required)");
      var meta = doc["#meta"] || {};
      var model = meta.source || meta.model || "";
      var vars = doc.vars.filter(function (v) { return v.indexOf("mbt::") !== 0; });
      var inst = {}, sys = [];
      vars.forEach(function (v) {
        var m = /^q(\d+)\.(.+)$/.exec(v);
        if (m) { (inst[m[1]] = inst[m[1]] || []).push(m[2]); } else sys.push(v);
      });
      var ids = Object.keys(inst).sort(function (a, b) { return a - b; });
      var names = [];
      ids.forEach(function (i) { inst[i].forEach(function (n) { if (names.indexOf(n) < 0) names.push(n); }); });
      names.sort(function (a, b) { return a === "state" ? -1 : b === "state" ? 1 : a < b ? -1 : a > b ? 1 : 0; });
      var steps = doc.states.map(function (s, i) {
        var picks = s["mbt::nondetPicks"] || {}, params = {};
        Object.keys(picks).sort().forEach(function (k) { var p = picks[k]; if (p && p.tag === "Some") params[k] = show(p.value); });
        var who = "instance" in params ? "q" + params.instance : ("who" in params ? params.who : (i ? "all" : ""));
        var text = i === 0 ? "initial state" : who + " " + (s["mbt::actionTaken"] || "?") + Object.keys(params).filter(function (k) { return k !== "instance" && k !== "who" && !(k === "refused" && params[k] === "false"); }).map(function (k) { return " " + k + "=" + params[k]; }).join("");
        return {state: s, action: s["mbt::actionTaken"] || "", who: who, text: text, refused: params.refused === "true"};
      });
      var divergence = null, violated = meta.violated ? String(meta.violated) : "";
      if (violated) {
        var m = /after step (\d+)/.exec(violated);
        var at = m ? parseInt(m[1], 10) : steps.length - 1;
        var prefix = /^(q\d+) differs/.exec(violated);
        var diffs = [], body = violated.replace(/^.*? after step \d+: /, "");
        var re = /([A-Za-z_][\w.]*): implementation (.*?), model (.*?)(?=, [A-Za-z_][\w.]*: implementation |; |$)/g, d;
        if (m) while ((d = re.exec(body)) !== null) diffs.push({name: (prefix ? prefix[1] + "." : "") + d[1], impl: d[2], model: d[3]});
        divergence = {step: Math.min(at, steps.length - 1), text: violated, diffs: diffs, kind: "implementation"};
      } else if (meta.status === "violation" || meta.kind) {
        divergence = {step: steps.length - 1, kind: "model", diffs: [],
          text: (meta.kind || "violation") + (meta.property ? " " + meta.property : "") + (meta.rules && meta.rules.length ? " (rules " + meta.rules.join(", ") + ")" : "") + (meta.description ? ": " + meta.description : "")};
      }
      return {file: file, model: model, meta: meta, ids: ids, names: names, sys: sys, steps: steps, divergence: divergence};
    }
    function clearMarks() {
      items.forEach(function (g) { g.classList.remove("cx-current", "cx-other", "cx-edge", "cx-loop"); });
      tags.forEach(function (t) { t.parentNode && t.parentNode.removeChild(t); }); tags = [];
    }
    function tag(g, text) {
      var b = g.getBBox(), t = document.createElementNS("http://www.w3.org/2000/svg", "text");
      t.setAttribute("x", b.x - 2); t.setAttribute("y", b.y - 3); t.setAttribute("class", "cx-tag");
      t.textContent = text; g.appendChild(t); tags.push(t);
    }
    function highlight() {
      clearMarks(); unselect();
      var st = trace.steps[pos], prev = pos ? trace.steps[pos - 1] : null;
      var lines = [];
      if (isMachine) {
        var byState = {};
        trace.ids.forEach(function (i) { var s = show(st.state["q" + i + ".state"]); (byState[s] = byState[s] || []).push("q" + i); });
        Object.keys(byState).forEach(function (s) { if (nodes[s]) { nodes[s].classList.add("cx-other"); tag(nodes[s], byState[s].join(" ")); } });
        var actors = st.who === "all" ? trace.ids.map(function (i) { return "q" + i; }) : [st.who];
        actors.forEach(function (q) {
          var now = show(st.state[q + ".state"]), before = prev ? show(prev.state[q + ".state"]) : null;
          if (nodes[now]) { nodes[now].classList.remove("cx-other"); nodes[now].classList.add("cx-current"); ensureVisible(nodes[now]); }
          if (prev && before !== null) {
            if (before === now) { if (nodes[now] && !st.refused) nodes[now].classList.add("cx-loop"); }
            else { var e = edgeOf(before, now, st.action); if (e) e.classList.add("cx-edge"); }
            if (before !== now || st.who !== "all") lines.push(q + ": " + before + " → " + now);
          }
        });
      } else if (pos) {
        var g = st.who === "system" ? edgeGroups.filter(function (x) { return words(x).indexOf(st.action) >= 0; })[0]
          : st.who === "all" ? nodes["sync_" + st.action] : nodes.instances;
        if (g) g.classList.add(g.classList.contains("edge") ? "cx-edge" : "cx-current");
        lines.push(st.who + " " + st.action);
      }
      status.textContent = "step " + pos + "/" + (trace.steps.length - 1) + (pos ? ": " + st.text : "") + (lines.length ? " · " + lines.join(", ") : "");
    }
    function table() {
      var st = trace.steps[pos], prev = pos ? trace.steps[pos - 1] : null, div = trace.divergence;
      var diffs = {};
      if (div && div.step === pos) div.diffs.forEach(function (d) { diffs[d.name] = d; });
      function cell(name) {
        var v = show(st.state[name]), changed = prev && show(prev.state[name]) !== v, d = diffs[name];
        if (d) return el("td", {class: "diverged", title: "model vs implementation"}, el("span", {class: "model"}, "model " + d.model), el("br"), el("span", {class: "impl"}, "impl " + d.impl));
        return el("td", {class: changed ? "changed" : null, title: changed ? "was " + show(prev.state[name]) : null}, v);
      }
      var rows = trace.names.map(function (n) {
        return el("tr", {}, el("th", {}, n), trace.ids.map(function (i) { return name_in(i, n) ? cell("q" + i + "." + n) : el("td", {class: "muted"}, ""); }));
      });
      function name_in(i, n) { return ("q" + i + "." + n) in st.state; }
      var sysRows = trace.sys.map(function (n) {
        var c = cell(n); c.setAttribute("colspan", Math.max(trace.ids.length, 1));
        return el("tr", {}, el("th", {}, n), c);
      });
      return el("table", {class: "vars", id: "cx-table"}, el("tr", {}, el("th", {}, "variable"), trace.ids.map(function (i) { return el("th", {}, "q" + i); })), rows,
        sysRows.length ? [el("tr", {}, el("th", {colspan: trace.ids.length + 1}, "shared and system variables"))].concat(sysRows) : null);
    }
    function render() {
      var area = $("#cx-area");
      clear(area);
      if (!trace) return;
      var div = trace.divergence;
      add(area, el("p", {}, code(trace.file), " ", el("span", {class: "muted"}, (trace.meta.generator || "") + ", " + (trace.steps.length - 1) + " steps")),
        el("div", {class: "player-controls"},
          el("button", {id: "cx-first", title: "first step", onclick: function () { go(0); }}, "|◀"),
          el("button", {id: "cx-back", title: "step back (←)", onclick: function () { step(-1); }}, "◀"),
          el("button", {id: "cx-forward", title: "step forward (→)", onclick: function () { step(1); }}, "▶"),
          el("button", {id: "cx-last", title: "last step", onclick: function () { go(trace.steps.length - 1); }}, "▶|"),
          div ? el("button", {id: "cx-divergence", onclick: function () { go(div.step); }}, div.kind === "model" ? "to the violation" : "to the divergence") : null,
          el("span", {class: "pos", id: "cx-pos"}, "step " + pos + " / " + (trace.steps.length - 1))),
        el("ol", {class: "steps", start: 0}, trace.steps.map(function (s, i) {
          var li = el("li", {class: (i === pos ? "current " : "") + (div && div.step === i ? "diverging" : ""), "data-mark": div && div.step === i ? (div.kind === "model" ? "breaks" : "diverges") : null, onclick: function () { go(i); }}, s.text + (s.refused ? " (refused)" : ""));
          li.value = i; return li;
        })));
      if (div && div.step === pos) {
        add(area, el("div", {class: "side-by-side", id: "cx-diverges"},
          el("div", {class: "h", style: "grid-column: 1 / -1"}, div.kind === "model" ? "The model's property breaks here" : "The implementation diverges here"),
          div.diffs.length ? [el("div", {class: "h"}, "variable"), el("div", {class: "h model"}, "model"), el("div", {class: "h impl"}, "implementation")].concat(
            div.diffs.map(function (d) { return [el("div", {}, code(d.name)), el("div", {class: "model"}, d.model), el("div", {class: "impl"}, d.impl)]; })) : null,
          el("div", {style: "grid-column: 1 / -1"}, div.text)));
      } else if (div) add(area, el("p", {class: "muted"}, (div.kind === "model" ? "The property breaks" : "The implementation diverges") + " at step " + div.step + "."));
      add(area, table());
      highlight();
    }
    function go(i) { if (!trace) return; pos = Math.max(0, Math.min(trace.steps.length - 1, i)); render(); }
    function step(d) { go(pos + d); }
    function load(doc, file) {
      var msg = $("#cx-message"); clear(msg);
      var t;
      try { t = parse(doc, file); } catch (e) { add(msg, el("p", {class: "error"}, e.message)); return false; }
      if (t.model !== D.page) {
        add(msg, el("p", {class: "error"}, file + " is a counterexample of " + (t.model || "an unnamed model") + ", not of " + D.page + ": open it on ", el("a", {href: t.model + ".html"}, t.model + ".html"), "."));
        return false;
      }
      trace = t; pos = 0; render(); return true;
    }
    function openNamed(file) {
      var found = D.counterexamples.filter(function (c) { return c.file === file; })[0];
      if (!found) { resolved(false, "counterexample " + file); showTab("player"); var msg = $("#cx-message"); clear(msg); add(msg, el("p", {class: "error"}, "No embedded counterexample named " + file + " on this page.")); return; }
      $("#cx-select").value = file;
      load(found.trace, found.file);
      document.body.setAttribute("data-resolved", "ok");
    }
    add(box, el("h2", {}, "Counterexample player"));
    var select = el("select", {id: "cx-select", "aria-label": "embedded counterexamples"}, el("option", {value: ""}, D.counterexamples.length ? "— choose one of " + D.counterexamples.length + " embedded —" : "— none embedded —"),
      D.counterexamples.map(function (c) { return el("option", {value: c.file}, c.file); }));
    select.addEventListener("change", function () { if (select.value) location.hash = "cx=" + encodeURIComponent(select.value); });
    var picker = el("input", {type: "file", id: "cx-file", accept: ".json,application/json"});
    picker.addEventListener("change", function () {
      var f = picker.files[0]; if (!f) return;
      var r = new FileReader();
      r.onload = function () {
        var doc;
        try { doc = JSON.parse(r.result); } catch (e) { var msg = $("#cx-message"); clear(msg); add(msg, el("p", {class: "error"}, f.name + " is not JSON: " + e.message)); return; }
        load(doc, f.name);
      };
      r.readAsText(f);
    });
    add(box, el("p", {}, select), el("p", {}, "or open an ITF file (explore --itf, lockstep, settled-counterexamples/): ", picker), el("div", {id: "cx-message"}), el("div", {id: "cx-area"}));
    return {step: step, go: go, openNamed: openNamed};
  })();

  window.addEventListener("hashchange", route);
  fitWidth();
  route();
  window.__settledReady = performance.now(); document.body.setAttribute("data-ready", "1");
})();
