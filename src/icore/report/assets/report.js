/* icore report: bundled, offline, no dependencies. */
(function () {
  "use strict";
  function onReady(fn) {
    if (document.readyState !== "loading") { fn(); } else { document.addEventListener("DOMContentLoaded", fn); }
  }
  function obligationGraph() {
    // Obligation graph: clicking a node highlights that obligation's assertions.
    var nodes = document.querySelectorAll("#obligation-graph .node");
    nodes.forEach(function (node) {
      function select() {
        var id = node.getAttribute("data-obligation");
        nodes.forEach(function (n) { n.classList.toggle("selected", n === node); });
        document.querySelectorAll("#assertions tr[data-obligation]").forEach(function (row) {
          row.classList.toggle("highlight", row.getAttribute("data-obligation") === id);
        });
        var first = document.querySelector('#assertions tr[data-obligation="' + id + '"]');
        if (first) { first.scrollIntoView({ block: "center" }); }
      }
      node.addEventListener("click", select);
      node.addEventListener("keydown", function (e) { if (e.key === "Enter") { select(); } });
    });
  }
  function sortableTables() {
    // Index: click a column header to sort.
    document.querySelectorAll("table.sortable").forEach(function (table) {
      table.querySelectorAll("thead th").forEach(function (th, col) {
        th.addEventListener("click", function () {
          var body = table.tBodies[0];
          var rows = Array.prototype.slice.call(body.rows);
          var asc = th.getAttribute("data-sort") !== "asc";
          rows.sort(function (a, b) {
            var x = a.cells[col].textContent, y = b.cells[col].textContent;
            var nx = parseFloat(x), ny = parseFloat(y);
            var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
            return asc ? c : -c;
          });
          rows.forEach(function (r) { body.appendChild(r); });
          th.setAttribute("data-sort", asc ? "asc" : "desc");
        });
      });
    });
  }
  function eventGraph() {
    // G: one page of events at a time, zoom in/out, or every page at once.
    var pages = Array.prototype.slice.call(document.querySelectorAll("svg.g-page"));
    var controls = document.getElementById("g-controls");
    if (!pages.length || !controls) { return; }
    var label = document.getElementById("g-page-label");
    var current = 0, scale = 1, all = false;
    var base = pages.map(function (p) {
      return [parseFloat(p.getAttribute("width")), parseFloat(p.getAttribute("height"))];
    });
    function show() {
      pages.forEach(function (p, i) {
        p.classList.toggle("hidden", !all && i !== current);
        p.setAttribute("width", String(base[i][0] * scale));
        p.setAttribute("height", String(base[i][1] * scale));
      });
      label.textContent = all ? "all " + pages.length + " pages"
        : "page " + (current + 1) + " of " + pages.length + " (events " +
          pages[current].getAttribute("data-first") + "–" + pages[current].getAttribute("data-last") + ")";
    }
    controls.addEventListener("click", function (e) {
      var what = e.target && e.target.getAttribute ? e.target.getAttribute("data-g") : null;
      if (what === "prev") { current = Math.max(0, current - 1); all = false; }
      else if (what === "next") { current = Math.min(pages.length - 1, current + 1); all = false; }
      else if (what === "zoom-in") { scale = Math.min(4, scale * 1.25); }
      else if (what === "zoom-out") { scale = Math.max(0.25, scale / 1.25); }
      else if (what === "all") { all = !all; }
      else { return; }
      show();
    });
    // following a link to an event on another page opens that page
    function openFor(hash) {
      if (!hash || hash.indexOf("#ev-") !== 0) { return; }
      var id = decodeURIComponent(hash.slice(4));
      pages.forEach(function (p, i) {
        p.querySelectorAll(".gev").forEach(function (a) {
          if (a.getAttribute("href") === "#ev-" + id) { current = i; }
        });
      });
      show();
    }
    window.addEventListener("hashchange", function () { openFor(window.location.hash); });
    show();
  }
  function openTargets() {
    // following a link to a closed lineage picture (e.g. from a notice) opens it
    function open() {
      var id = decodeURIComponent(window.location.hash.slice(1));
      var el = id ? document.getElementById(id) : null;
      var d = el && el.querySelector ? el.querySelector("details.lineage-body") : null;
      if (d && !d.open) { d.open = true; el.scrollIntoView(); }
    }
    window.addEventListener("hashchange", open);
    open();
  }
  onReady(function () {
    document.documentElement.classList.add("js");
    openTargets();
    obligationGraph();
    sortableTables();
    eventGraph();
    document.documentElement.setAttribute("data-report-ready", "1");
  });
})();
