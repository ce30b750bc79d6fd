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
    return '<div class="wide"><table class="compare"><thead><tr>' + head.map(function (h) { return '<th>' + esc(h).split(/(\s+)/).map(function (w) { return /[-\/\u2010\u2013\u2014]/.test(w) ? '<span class="nw">' + w + '</span>' : w; }).join('') + '</th>'; }).join('') +
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
  // the board's test between the rows the two runs are seeds of (compare_seeds.py computed it as the front page
  // does: mean over each row's seeds, Welch interval over seeds); a pair it cannot judge says so in words
  function seedLevel(ra, rb) {
    var na = (data.rows || {})[ra], nb = (data.rows || {})[rb];
    var cannot = function (why) { return '<p class="verdict" id="verdict"><b>Cannot be judged</b>: ' + why +
      ' The numbers below describe these two runs only; they decide nothing.</p>'; };
    if (ra === rb) return cannot('A and B are the same run.');
    if (!na || !nb) return cannot((na ? 'B is' : nb ? 'A is' : 'neither run is') + ' a row of the board (no ' +
      'training seeds to compare over), so the board\'s test does not apply.');
    if (na === nb) return cannot('both runs are seeds of the same row, ' + esc(na) + ': their difference is the ' +
      'seed-to-seed spread the board\'s intervals are made of.');
    var flip = na > nb, list = (data.seeds || {})[flip ? nb + '|' + na : na + '|' + nb];
    if (!list) return cannot(esc(na) + ' and ' + esc(nb) + ' are rows of different boards (another source or size).');
    var words = {win: 'A better (interval clear of 1)', loss: 'B better (interval clear of 1)', 'within noise': 'within noise'};
    var judged = 0, body = list.map(function (c) {
      var ppl = c.kind === 'ppl', v = c.value, lo = c.lo, hi = c.hi, out = c.outcome;
      var sa = flip ? c.b_seeds : c.a_seeds, sb = flip ? c.a_seeds : c.b_seeds;
      if (flip) {
        v = ppl ? 1 / v : -v;
        if (lo != null) { var l = lo; lo = ppl ? 1 / hi : -hi; hi = ppl ? 1 / l : -l; }
        out = out === 'win' ? 'loss' : out === 'loss' ? 'win' : out;
      }
      if (out !== 'no interval') judged++;
      var verdict = out === 'no interval' ? 'cannot be judged: ' + Math.min(sa, sb) + ' seed on a side' : words[out];
      if (!ppl && out === 'win') verdict = 'A better (interval clear of 0)';
      if (!ppl && out === 'loss') verdict = 'B better (interval clear of 0)';
      return ['<td>' + esc(c.label) + '</td>', '<td class="num">' + sa + ' vs ' + sb + '</td>',
        '<td class="num diff">' + (ppl ? '×' + num(v, 3) : (v >= 0 ? '+' : '') + num(v, 3)) + '</td>',
        '<td class="num">' + (lo == null ? 'none' : ppl ? '×' + num(lo, 3) + ' to ×' + num(hi, 3) : num(lo, 3) + ' to ' + num(hi, 3)) + '</td>',
        '<td class="outcome">' + verdict + '</td>'];
    });
    var lead = '<p class="verdict" id="verdict">A is a seed of <b>' + esc(na) + '</b>, B of <b>' + esc(nb) +
      '</b>. ' + (judged ? 'Judged as the front page judges it: the mean over each row\'s seeds, with a 95 % Welch interval over seeds.'
        : '<b>Cannot be judged</b>: a row with one seed has no interval over seeds; the numbers below decide nothing.') + '</p>';
    return lead + table(['column', 'seeds (A vs B)', 'A ÷ B or A − B (mean over seeds)', '95 % interval over seeds', 'verdict'], body);
  }
  function show() {
    var link = '#a=' + a.value + '&b=' + b.value;
    document.getElementById('permalink').setAttribute('href', link);
    if (location.hash !== link && history.replaceState) history.replaceState(null, '', link);
    var ra = a.value, rb = b.value, flip = ra > rb, key = flip ? rb + '|' + ra : ra + '|' + rb;
    var pairs = data.pairs[key] || [], paired = {}, rows = [], ex = [];
    pairs.forEach(function (p) {
      var d = flip ? -p.diff : p.diff;
      var ao = flip ? p.b_only : p.a_only, bo = flip ? p.a_only : p.b_only;
      var ac = flip ? p.b_only_count : p.a_only_count, bc = flip ? p.a_only_count : p.b_only_count;
      paired[p.task] = true;
      rows.push(['<td>' + esc(p.task) + '</td>', '<td class="num">' + p.n + '</td>',
        '<td class="num">' + num(flip ? p.b_acc : p.a_acc) + '</td>', '<td class="num">' + num(flip ? p.a_acc : p.b_acc) + '</td>',
        '<td class="num diff">' + (d >= 0 ? '+' : '') + num(d) + '</td>',
        '<td class="num">' + ac + ' / ' + bc + '</td>']);
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
      var r = flip ? 1 / p.ratio : p.ratio;
      paired[p.task] = true;
      return ['<td>' + esc(p.task) + '</td>', '<td class="num">' + p.length + '</td>', '<td class="num">' + p.n + '</td>',
        '<td class="num">' + num(flip ? p.b_ppl : p.a_ppl) + '</td>', '<td class="num">' + num(flip ? p.a_ppl : p.b_ppl) + '</td>',
        '<td class="num diff">×' + num(r) + '</td>'];
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
    document.getElementById('seeds').innerHTML = seedLevel(ra, rb);
    document.getElementById('paired').innerHTML = (rows.length ? table(['task', 'shared examples', 'A accuracy',
      'B accuracy', 'A − B (these two runs)', 'A-only / B-only right'], rows) : '') +
      (prows.length ? table(['corpus', 'length', 'documents (same targets)', 'A perplexity', 'B perplexity',
        'A ÷ B (these two runs)'], prows) : '') + unpaired ||
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
