// otb report: lists, filters, sorts and opens the items embedded as JSON in this page.
// Every value from the data is put into the page with textContent (never as markup),
// so whatever a model wrote shows as text and runs nothing.
(function () {
  "use strict";
  var holder = document.getElementById("otb-data");
  if (!holder) return;
  var data = JSON.parse(holder.textContent);
  var cells = data.cells, items = data.items;
  var byCell = {};
  cells.forEach(function (c) { byCell[c.id] = c; });

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function cellTitle(c) {
    var t = c.setting + " · " + c.method;
    if (c.method === "toolobserver" || c.round > 0) t += " r" + c.round;
    if (c.split) t += " [" + c.split + "]";
    return t;
  }

  // Filters: one select per coordinate, with the values the data has.
  var filters = document.getElementById("otb-filters");
  var fields = [
    ["cell", "cell", function (i) { return String(i.cell); }, function (v) { return cellTitle(byCell[v]) + (byCell[v].agent ? " · " + byCell[v].agent : ""); }],
    ["setting", "setting / tool set", function (i) { return byCell[i.cell].setting; }],
    ["method", "method", function (i) { return byCell[i.cell].method; }],
    ["round", "round", function (i) { return String(byCell[i.cell].round); }],
    ["verdict", "verdict", function (i) { return i.verdict; }],
    ["error", "error kind", function (i) { return i.error || "none"; }]
  ];
  var selects = {};
  fields.forEach(function (f) {
    var seen = {}, values = [];
    items.forEach(function (i) { var v = f[2](i); if (!seen[v]) { seen[v] = 1; values.push(v); } });
    var lab = el("label", f[1] + " ");
    var s = el("select");
    s.id = "otb-f-" + f[0];
    s.appendChild(el("option", "all")).value = "";
    values.sort(function (a, b) { return f[0] === "cell" || f[0] === "round" ? a - b : (a < b ? -1 : a > b ? 1 : 0); });
    values.forEach(function (v) { var o = el("option", f[3] ? f[3](v) : v); o.value = v; s.appendChild(o); });
    s.addEventListener("change", render);
    lab.appendChild(s);
    filters.appendChild(lab);
    selects[f[0]] = s;
  });
  var search = el("input");
  search.type = "search";
  search.placeholder = "search ids and summaries";
  search.id = "otb-search";
  search.addEventListener("input", render);
  filters.appendChild(search);
  var count = el("span", "", "muted");
  count.id = "otb-count";
  filters.appendChild(count);

  // The list, sortable by its headers.
  var list = document.getElementById("otb-items");
  var detail = document.getElementById("otb-detail");
  var sortKey = null, sortDir = 1;
  var cols = [
    ["cell", function (i) { return i.cell; }],
    ["item", function (i) { return i.id; }],
    ["verdict", function (i) { return i.verdict; }],
    ["score", function (i) { return i.score; }],
    ["what happened", function (i) { return i.summary; }]
  ];
  var table = el("table"), thead = el("thead"), hr = el("tr"), tbody = el("tbody");
  cols.forEach(function (c, k) {
    var th = el("th", c[0], "sortable");
    th.addEventListener("click", function () { sortDir = sortKey === k ? -sortDir : 1; sortKey = k; render(); });
    hr.appendChild(th);
  });
  thead.appendChild(hr); table.appendChild(thead); table.appendChild(tbody); list.appendChild(table);

  function shown() {
    var q = search.value.toLowerCase();
    var out = items.filter(function (i) {
      for (var k = 0; k < fields.length; k++) {
        var s = selects[fields[k][0]];
        if (s.value !== "" && fields[k][2](i) !== s.value) return false;
      }
      return !q || i.id.toLowerCase().indexOf(q) >= 0 || i.summary.toLowerCase().indexOf(q) >= 0;
    });
    if (sortKey !== null) {
      var f = cols[sortKey][1];
      out.sort(function (a, b) { var x = f(a), y = f(b); return (x < y ? -1 : x > y ? 1 : 0) * sortDir; });
    }
    return out;
  }
  var openItem = null;
  function render() {
    var rows = shown();
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    rows.forEach(function (i) {
      var tr = el("tr", null, "item" + (i === openItem ? " open" : ""));
      tr.setAttribute("data-cell", i.cell);
      tr.setAttribute("data-id", i.id);
      tr.appendChild(el("td", cellTitle(byCell[i.cell])));
      tr.appendChild(el("td", i.id, "ids"));
      tr.appendChild(el("td", i.verdict, "v-" + i.verdict));
      tr.appendChild(el("td", i.score, "num"));
      tr.appendChild(el("td", i.summary));
      tr.addEventListener("click", function () { open(i); location.hash = "item=" + i.cell + ":" + encodeURIComponent(i.id); });
      tbody.appendChild(tr);
    });
    count.textContent = rows.length + " of " + items.length + " items";
  }

  function board(fen) {
    var glyph = { K: "\u2654", Q: "\u2655", R: "\u2656", B: "\u2657", N: "\u2658", P: "\u2659", k: "\u265a", q: "\u265b", r: "\u265c", b: "\u265d", n: "\u265e", p: "\u265f" };
    var b = el("div", null, "board");
    var ranks = String(fen).split(" ")[0].split("/");
    for (var r = 0; r < 8; r++) {
      var row = ranks[r] || "8", f = 0;
      for (var k = 0; k < row.length && f < 8; k++) {
        var ch = row[k];
        var n = parseInt(ch, 10);
        var cnt = isNaN(n) ? 1 : Math.min(n, 8);
        for (var j = 0; j < cnt && f < 8; j++, f++) {
          b.appendChild(el("span", isNaN(n) ? (glyph[ch] || "?") : "", (r + f) % 2 ? "d" : "l"));
        }
      }
      for (; f < 8; f++) b.appendChild(el("span", "", (r + f) % 2 ? "d" : "l"));
    }
    return b;
  }
  function block(b) {
    var d = el("div", null, "block block-" + b.k);
    d.appendChild(el("h4", b.t));
    if (b.k === "Text") d.appendChild(el("p", b.v));
    else if (b.k === "Code") d.appendChild(el("pre", b.v));
    else if (b.k === "Kv") {
      var t = el("table", null, "kv");
      b.v.forEach(function (p) { var tr = el("tr"); tr.appendChild(el("td", p[0])); tr.appendChild(el("td", p[1])); t.appendChild(tr); });
      d.appendChild(t);
    } else if (b.k === "Table") {
      var t2 = el("table", null, "rows"), h = el("tr");
      b.head.forEach(function (c) { h.appendChild(el("th", c)); });
      t2.appendChild(h);
      b.rows.forEach(function (r) { var tr = el("tr"); r.forEach(function (c) { tr.appendChild(el("td", c)); }); t2.appendChild(tr); });
      d.appendChild(t2);
    } else if (b.k === "Board") {
      var at = 0, cap = el("div", "", "muted"), holderB = el("div");
      var prev = el("button", "\u25c0 previous"), next = el("button", "next \u25b6");
      var show = function () {
        while (holderB.firstChild) holderB.removeChild(holderB.firstChild);
        holderB.appendChild(board(b.fens[at]));
        cap.textContent = (at + 1) + " / " + b.fens.length + ": " + b.labels[at];
      };
      prev.addEventListener("click", function () { if (at > 0) { at--; show(); } });
      next.addEventListener("click", function () { if (at < b.fens.length - 1) { at++; show(); } });
      d.appendChild(prev); d.appendChild(next); d.appendChild(cap); d.appendChild(holderB);
      show();
    }
    return d;
  }
  function open(i) {
    openItem = i;
    while (detail.firstChild) detail.removeChild(detail.firstChild);
    var c = byCell[i.cell];
    detail.appendChild(el("h3", i.id));
    var meta = el("p", null, "muted");
    meta.textContent = cellTitle(c) + " · agent " + c.agent + (c.editor ? " · editor " + c.editor : "") + " · ";
    meta.appendChild(el("span", i.verdict, "v-" + i.verdict));
    detail.appendChild(meta);
    if (c.docs) detail.appendChild(block({ k: "Code", t: "Documentation the agent saw", v: c.docs }));
    i.detail.forEach(function (b) { detail.appendChild(block(b)); });
    Array.prototype.forEach.call(tbody.children, function (tr) {
      tr.className = "item" + (tr.getAttribute("data-cell") === String(i.cell) && tr.getAttribute("data-id") === i.id ? " open" : "");
    });
  }

  // The item browser is folded below the tables and curves: a link to a cell or an
  // item unfolds it and brings it into view.
  function unfold() {
    var d = document.getElementById("otb-items-fold");
    if (d && !d.open) d.open = true;
    var s = document.getElementById("items");
    if (s && s.scrollIntoView) s.scrollIntoView();
  }
  // #cell=N filters to a cell; #item=N:ID opens an item (links to either can be shared).
  function route() {
    var h = decodeURIComponent(location.hash.replace(/^#/, ""));
    var m = /^cell=(\d+)$/.exec(h);
    if (m && byCell[m[1]]) { selects.cell.value = m[1]; render(); unfold(); return; }
    m = /^item=(\d+):(.*)$/.exec(h);
    if (m) {
      var found = items.filter(function (i) { return String(i.cell) === m[1] && i.id === m[2]; })[0];
      if (found) { selects.cell.value = m[1]; render(); open(found); unfold(); }
    }
  }
  render();
  route();
  window.addEventListener("hashchange", route);
})();
