
document.querySelectorAll('table.sortable').forEach(function (t) {
  t.querySelectorAll('th').forEach(function (th, i) {
    th.addEventListener('click', function () {
      var asc = !th.classList.contains('sorted-asc');
      t.querySelectorAll('th').forEach(function (h) { h.classList.remove('sorted-asc', 'sorted-desc'); });
      th.classList.add(asc ? 'sorted-asc' : 'sorted-desc');
      var body = t.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      function key(r) {
        var c = r.cells[i], s = c ? (c.getAttribute('data-sort') || c.textContent) : '';
        var f = parseFloat(s);
        return isNaN(f) || !/^\s*[-+]?(\d|\.\d|inf)/i.test(s) ? [1, s.toLowerCase()] : [0, f];
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x[0] !== y[0]) return x[0] - y[0];
        var d = x[0] ? String(x[1]).localeCompare(String(y[1]), undefined, {numeric: true})
                     : x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0;
        return asc ? d : -d;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
document.querySelectorAll('input.filter').forEach(function (inp) {
  inp.addEventListener('input', function () {
    var t = document.getElementById(inp.getAttribute('data-table')), q = inp.value.toLowerCase();
    Array.prototype.forEach.call(t.tBodies[0].rows, function (r) {
      r.style.display = r.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
    });
  });
});
