// The compare page: looks up what leaderboard/site/compare_numbers.py computed for the two runs picked (no statistics here).
// The page embeds each run's metrics and the examples; a run's pairs and responses come from compare/<run>.js,
// added as a <script> when the run is first picked (fetch() is refused from file://; a script is not).
(function () {
  var data = JSON.parse(document.getElementById('compare-data').textContent);
  data.pairs = {}; data.ppl_pairs = {}; data.ppl_unpaired = {}; data.responses = {};
  var loaded = {}, asked = {};
  window.peevalCompare = function (rid, part) {
    ['pairs', 'ppl_pairs', 'ppl_unpaired'].forEach(function (k) { Object.assign(data[k], part[k] || {}); });
    data.responses[rid] = part.responses || {};
    loaded[rid] = true;
  };
  var a = document.getElementById('run-a'), b = document.getElementById('run-b');
  // the scripts of the runs picked, then fn(); a run's script is added once, and fn() runs when both are in
  function need(ids, fn) {
    var missing = ids.filter(function (id) { return !loaded[id]; });
    if (!missing.length) { fn(); return; }
    missing.forEach(function (id) {
      if (asked[id]) return;
      asked[id] = true;
      var s = document.createElement('script');
      s.src = 'compare/' + id + '.js';
      s.onload = function () { render(); };
      s.onerror = function () { loaded[id] = true; render(); };  // shown as "share no examples", not a blank page
      document.head.appendChild(s);
    });
    document.getElementById('paired').innerHTML = '<p class="empty">loading…</p>';
  }
  function esc(s) { var d = document.createElement('div'); d.textContent = s == null ? '' : String(s); return d.innerHTML; }
  function num(v, digits) { return v == null ? '–' : (Math.abs(v) >= 1000 ? v.toFixed(0) : v.toPrecision(digits || 4)); }
  function table(head, rows) {
    return '<div class="wide"><table class="compare"><thead><tr>' + head.map(function (h) { return '<th>' + esc(h) + '</th>'; }).join('') +
      '</tr></thead><tbody>' + rows.map(function (r) { return '<tr>' + r.join('') + '</tr>'; }).join('') + '</tbody></table></div>';
  }
  // names with numbers in them sort as numbers: ppl@256, ppl@1024, ppl@2048 (not @1024, @2048, @256)
  function natural(x, y) { return x.localeCompare(y, 'en', {numeric: true}); }
  // the comparison's address: #a=<run>&b=<run> picks the pair; changing a picker updates it
  function fromHash() {
    var m = /a=([0-9a-f]+)&b=([0-9a-f]+)/.exec(location.hash);
    var has = function (sel, v) { return Array.prototype.some.call(sel.options, function (o) { return o.value === v; }); };
    if (m && has(a, m[1]) && has(b, m[2])) { a.value = m[1]; b.value = m[2]; }
  }
  function render() { need([a.value, b.value], show); }
  function show() {
    var link = '#a=' + a.value + '&b=' + b.value;
    document.getElementById('permalink').setAttribute('href', link);
    if (location.hash !== link && history.replaceState) history.replaceState(null, '', link);
    var ra = a.value, rb = b.value, flip = ra > rb, key = flip ? rb + '|' + ra : ra + '|' + rb;
    var pairs = data.pairs[key] || [], paired = {}, rows = [], ex = [];
    pairs.forEach(function (p) {
      var d = flip ? -p.diff : p.diff, lo = flip ? (p.hi == null ? null : -p.hi) : p.lo, hi = flip ? (p.lo == null ? null : -p.lo) : p.hi;
      var ao = flip ? p.b_only : p.a_only, bo = flip ? p.a_only : p.b_only;
      var ac = flip ? p.b_only_count : p.a_only_count, bc = flip ? p.a_only_count : p.b_only_count;
      paired[p.task] = true;
      rows.push(['<td>' + esc(p.task) + '</td>', '<td class="num">' + p.n + '</td>',
        '<td class="num">' + num(flip ? p.b_acc : p.a_acc) + '</td>', '<td class="num">' + num(flip ? p.a_acc : p.b_acc) + '</td>',
        '<td class="num diff">' + (d >= 0 ? '+' : '') + num(d) + '</td>',
        '<td class="num">' + (lo == null ? 'no interval' : '[' + num(lo) + ', ' + num(hi) + ']') + '</td>',
        '<td class="num">' + num(p.mcnemar_p, 3) + '</td>', '<td class="num">' + ac + ' / ' + bc + '</td>']);
      [[ao, 'A right, B wrong', ac], [bo, 'B right, A wrong', bc]].forEach(function (g) {
        if (!g[0].length) return;
        ex.push('<h3>' + esc(p.task) + ': ' + g[1] + ' (' + g[2] + (g[2] > g[0].length ? ', first ' + g[0].length : '') + ')</h3>' +
          table(['doc', 'prompt', 'target', 'A answered', 'B answered'], g[0].map(function (doc) {
            var e = (data.examples[p.task] || {})[doc] || ['', ''], resp = data.responses;
            return ['<td class="num">' + doc + '</td>', '<td><pre>' + esc(e[0]) + '</pre></td>', '<td><pre>' + esc(e[1]) + '</pre></td>',
              '<td><pre>' + esc(((resp[ra] || {})[p.task] || {})[doc]) + '</pre></td>',
              '<td><pre>' + esc(((resp[rb] || {})[p.task] || {})[doc]) + '</pre></td>'];
          })));
      });
    });
    var ppl = (data.ppl_pairs || {})[key] || [];
    var prows = ppl.map(function (p) {
      var r = flip ? 1 / p.ratio : p.ratio, lo = p.lo == null ? null : flip ? 1 / p.hi : p.lo, hi = p.hi == null ? null : flip ? 1 / p.lo : p.hi;
      paired[p.task] = true;
      return ['<td>' + esc(p.task) + '</td>', '<td class="num">' + p.length + '</td>', '<td class="num">' + p.n + '</td>',
        '<td class="num">' + num(flip ? p.b_ppl : p.a_ppl) + '</td>', '<td class="num">' + num(flip ? p.a_ppl : p.b_ppl) + '</td>',
        '<td class="num diff">×' + num(r) + '</td>',
        '<td class="num">' + (lo == null ? 'no interval' : '[×' + num(lo) + ', ×' + num(hi) + ']') + '</td>'];
    });
    var ma = data.metrics[ra] || {}, mb = data.metrics[rb] || {}, side = [];
    // perplexity of the same corpus not paired (another tokenizer: the same token positions are other text): why,
    // and each run's bits per byte over its own targets beside each other, never a ratio of per-token perplexities
    var un = (data.ppl_unpaired || {})[key], unpaired = '';
    if (un) {
      var bytes = flip ? [un.b_bytes, un.a_bytes] : [un.a_bytes, un.b_bytes];
      unpaired = '<p class="unpaired" id="ppl-unpaired">Perplexity not paired: ' + esc(un.task) + ' @ ' + un.length + ': ' +
        (un.why === 'tokenizer' ? 'the same target tokens cover other text (A ' + bytes[0] + ' bytes, B ' + bytes[1] +
          ' bytes of document ' + un.doc + '): another tokenizer, so per-token perplexities are not comparable, nor are ' +
          'bits per byte over the same bytes; each run\'s bits per byte over its own targets:'
          : 'no document scored on the same targets (another protocol or target run)') + '</p>';
      var brows = [];
      Object.keys(ma).sort(natural).forEach(function (t) {
        if (!(t in mb)) return;
        Object.keys(ma[t]).sort(natural).forEach(function (m) {
          if (m.indexOf('bpb@') !== 0 || !(m in mb[t])) return;
          brows.push(['<td>' + esc(t) + '</td>', '<td class="num">' + esc(m.slice(4)) + '</td>',
            '<td class="num">' + num(ma[t][m][0]) + '</td>', '<td class="num">' + num(mb[t][m][0]) + '</td>']);
        });
      });
      if (un.why === 'tokenizer') unpaired += brows.length ? table(['corpus', 'length', 'A bits per byte (its own targets)',
        'B bits per byte (its own targets)'], brows) : '<p class="empty">neither run recorded bits per byte</p>';
    }
    document.getElementById('paired').innerHTML = (rows.length ? table(['task', 'shared examples', 'A acc', 'B acc',
      'A − B', '95 % interval', 'McNemar p', 'A-only / B-only right'], rows) : '') +
      (prows.length ? table(['corpus', 'length', 'documents (same targets)', 'A ppl', 'B ppl', 'A ÷ B',
        '95 % interval'], prows) : '') + unpaired ||
      '<p class="empty">these two runs share no examples with per-example outcomes, nor perplexity target blocks</p>';
    Object.keys(ma).sort(natural).forEach(function (t) {
      if (!(t in mb)) return;
      Object.keys(ma[t]).sort(natural).forEach(function (m) {
        if (!(m in mb[t])) return;
        var x = ma[t][m], y = mb[t][m];
        side.push(['<td>' + esc(t) + '</td>', '<td>' + esc(m) + '</td>',
          '<td class="num">' + num(x[0]) + (x[1] == null ? '' : ' <span class="se">± ' + num(x[1], 2) + '</span>') + '</td>',
          '<td class="num">' + num(y[0]) + (y[1] == null ? '' : ' <span class="se">± ' + num(y[1], 2) + '</span>') + '</td>',
          '<td>' + (paired[t] ? 'paired above' : 'not paired') + '</td>']);
      });
    });
    document.getElementById('side').innerHTML = side.length ? table(['task', 'metric', 'A', 'B', ''], side) :
      '<p class="empty">no task run by both</p>';
    document.getElementById('examples').innerHTML = ex.join('') || '<p class="empty">none</p>';
  }
  a.addEventListener('change', render);
  b.addEventListener('change', render);
  window.addEventListener('hashchange', function () { fromHash(); render(); });
  fromHash();
  render();
})();
