/* icore audit report: bundled, offline, no dependencies. */
(function () {
  "use strict";
  function onReady(fn) {
    if (document.readyState !== "loading") { fn(); } else { document.addEventListener("DOMContentLoaded", fn); }
  }
  onReady(function () {
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
    document.documentElement.setAttribute("data-report-ready", "1");
  });
})();
