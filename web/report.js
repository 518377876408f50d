// torchneck report.html: draws the embedded profile (profile.json's schema)
// and flame tree as DOM and SVG. Every string from the data goes in through
// textContent or SVG text nodes, never as markup: a module or file name is
// only ever text, its bidirectional controls shown rather than obeyed, and a
// name set among the page's own words is isolated in a <bdi>. No network, no
// library.
(function () {
  'use strict';
  var SVGNS = 'http://www.w3.org/2000/svg';
  var PHASES = ['data', 'forward', 'backward', 'optimizer', 'evaluation', 'other'];
  var PHASE_COLORS = { data: '#e74c3c', forward: '#3498db', backward: '#e67e22', optimizer: '#27ae60', evaluation: '#8e44ad', other: '#95a5a6' };

  // --- small helpers -------------------------------------------------------
  // Bidirectional controls (as printable_text escapes them in report.txt) are
  // shown as \u202e: an override in a name would otherwise run on past it and
  // reverse the page's own words that follow, in a line or a tooltip alike.
  var BIDI_CONTROLS = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  function shown(s) {
    return String(s).replace(BIDI_CONTROLS, function (c) {
      return '\\u' + ('000' + c.charCodeAt(0).toString(16)).slice(-4);
    });
  }
  function textNode(s) { return document.createTextNode(shown(s)); }
  function setText(node, s) { node.textContent = shown(s); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) setText(e, text);
    return e;
  }
  function svgEl(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    if (attrs) for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined && text !== null) setText(e, text);
    return e;
  }
  // A line of the page's own words with user text set in it (a path, an
  // argument, a class name): parts joined by ' \u00b7 ', each a string or an
  // array of strings and user(text) pieces. Each user piece goes in a <bdi>,
  // so that whatever its direction it cannot reorder the words around it.
  function user(s) { return { user: s }; }
  function fillLine(node, parts) {
    parts.forEach(function (part, i) {
      if (i) node.appendChild(textNode(' \u00b7 '));
      [].concat(part).forEach(function (piece) {
        node.appendChild(piece !== null && typeof piece === 'object' ? el('bdi', null, piece.user) : textNode(piece));
      });
    });
  }
  function svgTitle(parent, text) { parent.appendChild(svgEl('title', null, text)); }
  function byId(id) { return document.getElementById(id); }
  function num(v) { return typeof v === 'number' && isFinite(v) ? v : 0; }
  function fmt(v, digits) {
    if (v === null || v === undefined || (typeof v === 'number' && !isFinite(v))) return '-';
    if (typeof v !== 'number') return String(v);
    var d = digits === undefined ? (Math.abs(v) >= 100 ? 1 : Math.abs(v) >= 1 ? 2 : 3) : digits;
    return v.toFixed(d);
  }
  function fmtMs(v) { return fmt(v) + ' ms'; }
  function truncate(s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + '\u2026' : s; }
  function empty(container, text) { container.appendChild(el('div', 'empty', text)); }
  function widthOf(container, fallback) {
    var w = container.clientWidth || (container.parentNode && container.parentNode.clientWidth) || 0;
    return w > 100 ? w : (fallback || 900);
  }
  function legend(container, items) {
    var lg = el('div', 'legend');
    items.forEach(function (it) {
      var s = el('span');
      var sw = el('span', 'sw');
      sw.style.background = it.color;
      s.appendChild(sw);
      s.appendChild(textNode(it.label));
      lg.appendChild(s);
    });
    container.appendChild(lg);
  }

  var raw = byId('torchneck-data').textContent;
  var DATA = {};
  try { DATA = JSON.parse(raw) || {}; } catch (e) { DATA = {}; }
  var P = DATA.profile || {};
  var FLAME = DATA.flame || null;

  // --- header, verdict, findings -------------------------------------------
  function renderHeader() {
    var run = P.run || {};
    var env = P.env || {};
    if (run.script) document.title = 'torchneck: ' + shown(run.script);
    var parts = [];
    if (run.script !== undefined) parts.push(['script ', user(run.script)]);
    if (run.argv && run.argv.length > 1) {
      var args = ['args'];
      run.argv.slice(1).forEach(function (a) { args.push(' ', user(a)); });
      parts.push(args);
    }
    if (run.ending) parts.push('ended: ' + run.ending);
    if (run.wall_s !== undefined) parts.push('wall ' + fmt(run.wall_s) + ' s');
    if (run.python_mode) parts.push('python ' + run.python_mode + ' mode');
    fillLine(byId('run-line'), parts);
    var e = [];
    if (env.python) e.push('Python ' + env.python);
    if (env.torch) e.push('torch ' + env.torch);
    if (env.cpu_cores) e.push(env.cpu_cores + ' cores');
    if (env.torch_threads) e.push(env.torch_threads + ' torch threads');
    if (env.cuda) e.push('CUDA');
    (env.dataloaders || []).forEach(function (d) {
      e.push(['DataLoader(', user(d.dataset), ', num_workers=' + d.num_workers + ', batch_size=' + d.batch_size + ')']);
    });
    fillLine(byId('env-line'), e);
  }

  function renderToc() {
    var toc = byId('toc');
    document.querySelectorAll('main > section').forEach(function (s) {
      if (s.hidden) return;
      var h = s.querySelector('h2');
      var a = el('a', null, h ? h.textContent : s.id);
      a.href = '#' + s.id;
      toc.appendChild(a);
    });
  }

  function renderVerdict() {
    setText(byId('verdict'), P.verdict || 'No verdict: the profile is empty.');
    var box = byId('findings');
    var findings = P.findings || [];
    if (!findings.length) { empty(box, 'No findings.'); return; }
    findings.forEach(function (f) {
      var c = el('div', 'card');
      c.setAttribute('data-finding', f.id || '');
      var h = el('h4');
      var sev = String(f.severity || 'low');
      h.appendChild(el('span', 'badge ' + (sev === 'high' || sev === 'medium' ? sev : 'low'), sev));
      h.appendChild(textNode(f.title || ''));
      c.appendChild(h);
      if (f.evidence && f.evidence.length) {
        c.appendChild(el('div', 'muted', 'Evidence'));
        var ul = el('ul');
        f.evidence.forEach(function (x) { ul.appendChild(el('li', null, x)); });
        c.appendChild(ul);
      }
      if (f.recommendation) c.appendChild(el('div', 'rec', f.recommendation));
      var g = el('p');
      if (f.estimated_gain_pct !== null && f.estimated_gain_pct !== undefined) {
        g.appendChild(textNode(f.gain_is_upper_bound ? 'Estimated gain: up to ' : 'Estimated gain: '));
        g.appendChild(el('span', 'gain', fmt(f.estimated_gain_pct, 0) + ' % of step time'));
      } else {
        g.textContent = 'Estimated gain: not backed by a measurement.';
      }
      c.appendChild(g);
      if (f.gain_arithmetic) c.appendChild(el('div', 'muted', f.gain_arithmetic));
      if (f.confidence) c.appendChild(el('div', 'muted', 'Confidence: ' + f.confidence + ' (' + (f.confidence_basis || '') + ')'));
      box.appendChild(c);
    });
  }

  // --- stacked bars: one bar per row, one segment per key ------------------
  // opts: keys, colors, value(row, key), label(row, i), dim(row), median, unit
  function stackedBars(container, rows, opts) {
    var W = widthOf(container), H = 240, left = 56, right = 12, top = 14, bottom = 34;
    var plotW = W - left - right, plotH = H - top - bottom;
    var totals = rows.map(function (r) {
      var t = 0;
      opts.keys.forEach(function (k) { t += Math.max(0, num(opts.value(r, k))); });
      return t;
    });
    var max = Math.max.apply(null, totals.concat([opts.median || 0, 1e-9]));
    // A warm-up step many times the median would flatten every other bar:
    // scale to the steady steps and clip the rest, marked at the top.
    if (opts.dim) {
      var steadyMax = Math.max.apply(null, rows.map(function (r, i) { return opts.dim(r) ? 0 : totals[i]; }).concat([opts.median || 0, 1e-9]));
      if (max > steadyMax * 1.5) max = steadyMax * 1.25;
    }
    var s = svgEl('svg', { width: W, height: H, role: 'img' });
    var y = function (v) { return top + plotH - (v / max) * plotH; };
    [0, 0.5, 1].forEach(function (f) {
      var v = max * f;
      s.appendChild(svgEl('line', { x1: left, x2: left + plotW, y1: y(v), y2: y(v), stroke: '#d8dee4' }));
      s.appendChild(svgEl('text', { x: left - 4, y: y(v) + 4, 'text-anchor': 'end' }, fmt(v, v >= 100 ? 0 : 1)));
    });
    s.appendChild(svgEl('text', { x: 4, y: top - 2 }, opts.unit));
    var bw = plotW / Math.max(rows.length, 1), clipped = false;
    rows.forEach(function (r, i) {
      var x = left + i * bw, acc = 0;
      var g = svgEl('g', { 'class': 'bar', opacity: opts.dim && opts.dim(r) ? 0.35 : 1 });
      var tip = [opts.label(r, i) + ': ' + fmt(totals[i]) + ' ' + opts.unit];
      opts.keys.forEach(function (k) {
        var v = Math.max(0, num(opts.value(r, k)));
        tip.push(k + ' ' + fmt(v) + ' ' + opts.unit);
        v = Math.min(v, max - acc);
        if (v <= 0) return;
        var h = (v / max) * plotH;
        g.appendChild(svgEl('rect', { x: x + (bw > 3 ? 0.5 : 0), y: y(acc + v), width: Math.max(bw - (bw > 3 ? 1 : 0), 0.5), height: Math.max(h, 0.5), fill: opts.colors[k] }));
        acc += v;
      });
      if (totals[i] > max) {
        clipped = true;
        tip.push('clipped at the top of the chart');
        g.appendChild(svgEl('rect', { x: x, y: top - 4, width: Math.max(bw - 1, 1), height: 3, fill: '#1d2329', 'class': 'clipped' }));
      }
      if (opts.dim && opts.dim(r)) {
        tip.push('warm-up: left out of the statistics');
        g.appendChild(svgEl('rect', { x: x, y: top + plotH + 3, width: Math.max(bw - 1, 1), height: 4, fill: '#7f8c8d' }));
      }
      svgTitle(g, tip.join('\n'));
      s.appendChild(g);
    });
    if (opts.median) {
      s.appendChild(svgEl('line', { x1: left, x2: left + plotW, y1: y(opts.median), y2: y(opts.median), stroke: '#1d2329', 'stroke-dasharray': '5 3', 'class': 'median' }));
      s.appendChild(svgEl('text', { x: left + plotW, y: y(opts.median) - 4, 'text-anchor': 'end' }, 'median ' + fmt(opts.median) + ' ' + opts.unit));
    }
    if (rows.length) {
      s.appendChild(svgEl('text', { x: left, y: H - 12 }, opts.label(rows[0], 0)));
      s.appendChild(svgEl('text', { x: left + plotW, y: H - 12, 'text-anchor': 'end' }, opts.label(rows[rows.length - 1], rows.length - 1)));
    }
    container.appendChild(s);
    legend(container, opts.keys.map(function (k) { return { label: k, color: opts.colors[k] }; }).concat(
      opts.dim ? [{ label: 'warm-up / outlier (faded, grey mark)', color: '#7f8c8d' }] : []).concat(
      clipped ? [{ label: 'clipped (dark mark on top)', color: '#1d2329' }] : []));
  }

  function renderSteps() {
    var st = P.steps || {};
    var box = byId('chart-steps');
    var per = st.per_step || [];
    var every = (P.html_limits && P.html_limits.per_step_every) || 1;
    var line = [];
    if (st.counted_step_ms !== undefined) {
      // The window filled inside the first step (LBFGS): the run's steps and
      // the window's spans are told apart.
      line.push(st.count + ' steps (from ' + st.count_source + '.step calls over the whole run), ' +
        fmtMs(st.counted_step_ms) + ' each inside ' + st.count_source + '.step on average');
      if (st.step_ms) line.push('the timeline window filled up within the first: what follows is of its ' +
        (st.in_window || 0) + ' ' + (st.source || '?') + ' spans, ' + fmtMs(st.step_ms) + ' a span on average');
    } else {
      if (st.count !== undefined) line.push(st.count + ' steps (from ' + (st.source || '?') + ')');
      if (st.step_ms) line.push(fmtMs(st.step_ms) + ' a step on average (every step after warm-up, with its whole time)');
    }
    if (st.median_ms) line.push('median ' + fmtMs(st.median_ms));
    if (st.breakdown_pct) line.push(PHASES.filter(function (p) { return p !== 'evaluation' || num(st.breakdown_pct[p]) > 0; })
      .map(function (p) { return p + ' ' + fmt(num(st.breakdown_pct[p]), 1) + ' %'; }).join(', '));
    (st.frozen_networks || []).forEach(function (f) {
      line.push('forward includes ' + (f.trained ? 'the calls without backward of ' : 'frozen network ') + f.name + ': ' +
        fmtMs(f.ms_per_step) + ' a step, not evaluation');
    });
    if (st.warmup_excluded) line.push(st.warmup_excluded + ' warm-up step(s) left out');
    (st.slow || []).forEach(function (g) {
      line.push(g.count + ' slow steps, ' + g.kind + (g.period_steps ? ' (every ' + g.period_steps + ')' : '') + ': ' +
        fmt(num(g.share_pct), 1) + ' % of the time, mostly ' + g.phase + (g.what ? ' (' + g.what + ')' : ''));
    });
    if (every > 1) line.push('one step in ' + every + ' drawn');
    var wr = st.whole_run;
    if (wr) {
      // The steps after the timeline, by the step clocks (docs/endings.md).
      line.push('steps ' + (wr.beyond_first_step + 1) + '..' + wr.last_step + ' after the timeline window, by the step ' +
        'clocks: ' + fmtMs(wr.beyond_step_ms) + ' a step, data wait ' + fmtMs(wr.beyond_data_ms) +
        '; the whole run ' + fmtMs(wr.step_ms) + ' a step');
    } else if (st.timeline_truncated) {
      line.push('later steps beyond the timeline window');
    }
    setText(byId('steps-line'), line.join(' \u00b7 '));
    if (!per.length) { empty(box, 'No steps in the timeline.'); return; }
    stackedBars(box, per, {
      keys: PHASES, colors: PHASE_COLORS, unit: 'ms', median: st.median_ms,
      value: function (r, k) { return r.breakdown_ms ? r.breakdown_ms[k] : 0; },
      label: function (r, i) { return 'step ' + (i * every + 1); },
      dim: function (r) { return r.steady === false; }
    });
  }

  // --- layers: horizontal bars, forward + backward --------------------------
  function renderLayers() {
    var box = byId('chart-layers');
    var layers = (P.layers || []).slice();
    var many = layers.filter(function (l) { return l.depth > 0; });
    if (many.length) layers = many;  // the whole model's row would dwarf its layers
    layers.sort(function (a, b) { return (num(b.forward_ms) + num(b.backward_ms)) - (num(a.forward_ms) + num(a.backward_ms)); });
    var TOP = 20;
    layers = layers.slice(0, TOP);
    if (!layers.length) { empty(box, 'No nn.Module calls were seen.'); return; }
    var W = widthOf(box), rowH = 20, labelW = Math.min(360, W * 0.4), top = 4;
    var H = top + layers.length * rowH + 6;
    var max = Math.max.apply(null, layers.map(function (l) { return num(l.forward_ms) + num(l.backward_ms); }).concat([1e-9]));
    var plotW = W - labelW - 90;
    var s = svgEl('svg', { width: W, height: H, role: 'img' });
    layers.forEach(function (l, i) {
      var yy = top + i * rowH;
      var g = svgEl('g', { 'class': 'layer' });
      var label = l.name + (l.compiled ? ' [compiled]' : '') + ' (' + l.type + ')';  // torch.compile'd: its inside is unseen
      g.appendChild(svgEl('text', { x: labelW - 6, y: yy + 13, 'text-anchor': 'end', 'class': 'layer-name' }, truncate(label, Math.floor(labelW / 6.2))));
      var fw = (num(l.forward_ms) / max) * plotW, bw = (num(l.backward_ms) / max) * plotW;
      g.appendChild(svgEl('rect', { x: labelW, y: yy + 3, width: Math.max(fw, 0.5), height: rowH - 6, fill: PHASE_COLORS.forward }));
      g.appendChild(svgEl('rect', { x: labelW + fw, y: yy + 3, width: Math.max(bw, 0.5), height: rowH - 6, fill: PHASE_COLORS.backward }));
      g.appendChild(svgEl('text', { x: labelW + fw + bw + 4, y: yy + 13 }, fmt(num(l.forward_ms) + num(l.backward_ms), 0) + ' ms'));
      svgTitle(g, label + '\nforward ' + fmtMs(l.forward_ms) + ', backward ' + fmtMs(l.backward_ms) + ', ' + l.calls + ' calls, ' + l.params + ' parameters');
      s.appendChild(g);
    });
    box.appendChild(s);
    legend(box, [{ label: 'forward', color: PHASE_COLORS.forward }, { label: 'backward', color: PHASE_COLORS.backward }]);
    var all = (P.layers || []).length;
    box.appendChild(el('p', 'muted', 'Top ' + layers.length + ' of ' + all + ' modules by forward + backward time (inclusive of children), qualified names as named_modules().'));
  }

  // --- flame graph: icicle, zoom, search ------------------------------------
  function renderFlame() {
    var box = byId('chart-flame');
    if (!FLAME || !(num(FLAME.value) > 0)) { empty(box, 'No samples: the flame graph is empty (was --python=off, or the run too short?).'); return; }
    var nodes = [];
    (function index(n, parent, depth) {
      n._id = nodes.length; n._parent = parent; n._depth = depth;
      nodes.push(n);
      (n.children || []).forEach(function (c) { index(c, n, depth + 1); });
    })(FLAME, null, 0);
    var maxDepth = 0;
    nodes.forEach(function (n) { if (n._depth > maxDepth) maxDepth = n._depth; });
    var tools = el('div', 'flame-tools');
    var search = el('input');
    search.type = 'search';
    search.placeholder = 'Search functions, operators, files';
    search.setAttribute('aria-label', 'search the flame graph');
    var reset = el('button', null, 'Reset zoom');
    var status = el('span', 'status');
    tools.appendChild(search); tools.appendChild(reset); tools.appendChild(status);
    box.appendChild(tools);
    var legendItems = [];
    var seenKinds = {};
    nodes.forEach(function (n) { seenKinds[n.kind] = true; });
    var colors = { root: '#b8c4cf', thread: '#c9d3dc', python: '#f0b46a', module: '#c39bd3', 'operator': '#7fb3d5', backward: '#e59866', scope: '#a9d18e' };
    Object.keys(colors).forEach(function (k) { if (seenKinds[k]) legendItems.push({ label: k, color: colors[k] }); });
    legend(box, legendItems);
    var body = el('div', 'flame-body');
    box.appendChild(body);
    if (FLAME.omitted_nodes) box.appendChild(el('p', 'muted', FLAME.omitted_nodes + ' small frames folded into their callers.'));
    var ROW = 18;
    var zoom = FLAME;
    var query = '';

    function matches(n) {
      if (!query) return false;
      return String(n.name).toLowerCase().indexOf(query) >= 0 || String(n.file || '').toLowerCase().indexOf(query) >= 0;
    }
    function tip(n) {
      var t = n.name + (n.file ? '  ' + n.file + ':' + n.line : '') + '\n' + n.kind + ', total ' + fmtMs(num(n.value) / 1e6) +
        ' (' + fmt(100 * num(n.value) / num(FLAME.value), 1) + ' %), self ' + fmtMs(num(n.self) / 1e6);
      return t;
    }
    function frame(n, x, w, row, cls) {
      var d = el('div', 'frame kind-' + (colors[n.kind] ? n.kind : 'other') + (cls ? ' ' + cls : ''), n.name);
      d.style.left = x + 'px';
      d.style.width = Math.max(w, 1) + 'px';
      d.style.top = row * ROW + 'px';
      d.title = shown(tip(n));
      d.setAttribute('data-id', n._id);
      d.setAttribute('data-depth', n._depth);
      if (w < 18) d.textContent = '';
      d.addEventListener('click', function () { zoom = n; draw(); });
      if (query) d.classList.add(matches(n) ? 'match' : 'dim');
      body.appendChild(d);
    }
    function draw() {
      while (body.firstChild) body.removeChild(body.firstChild);
      var W = widthOf(body);
      var chain = [];
      for (var a = zoom._parent; a; a = a._parent) chain.unshift(a);
      chain.forEach(function (a, i) { frame(a, 0, W, i, 'ancestor'); });
      var base = chain.length, rows = base;
      var scale = W / Math.max(num(zoom.value), 1);
      (function place(n, x, row) {
        var w = num(n.value) * scale;
        frame(n, x, w, row, null);
        if (row > rows) rows = row;
        var cx = x;
        (n.children || []).forEach(function (c) {
          var cw = num(c.value) * scale;
          if (cw >= 0.5) place(c, cx, row + 1);
          cx += cw;
        });
      })(zoom, 0, base);
      body.style.height = (rows + 1) * ROW + 'px';
      var msg = zoom === FLAME ? '' : 'zoomed on ' + truncate(zoom.name, 60) + ' (' + fmt(100 * num(zoom.value) / num(FLAME.value), 1) + ' % of all). ';
      if (query) {
        var hit = 0, counted = [];
        nodes.forEach(function (n) {
          if (!matches(n)) return;
          for (var a = n._parent; a; a = a._parent) if (matches(a)) return;  // count outermost matches only
          counted.push(n);
          hit += num(n.value);
        });
        msg += counted.length + ' outermost matches, ' + fmt(100 * hit / num(FLAME.value), 1) + ' % of the time.';
      }
      setText(status, msg);
    }
    search.addEventListener('input', function () { query = search.value.trim().toLowerCase(); draw(); });
    reset.addEventListener('click', function () { zoom = FLAME; draw(); });
    draw();
  }

  // --- sortable tables -----------------------------------------------------
  // columns: {key, label, num, get(row), fmt(v)}
  // rowClass(row): a class for the row's <tr> (a highlighted rank), optional.
  function table(containerId, columns, rows, sortKey, limitNote, rowClass) {
    var box = byId(containerId);
    if (!rows.length) { empty(box, 'No rows.'); return; }
    var t = el('table');
    t.setAttribute('data-table', containerId);
    var thead = el('thead'), tr = el('tr'), tbody = el('tbody');
    var state = { key: sortKey, desc: true };
    function value(c, r) { return c.get ? c.get(r) : r[c.key]; }
    function fill() {
      var col = columns.filter(function (c) { return c.key === state.key; })[0];
      var sorted = rows.slice();
      if (col) {
        sorted.sort(function (a, b) {
          var va = value(col, a), vb = value(col, b), r;
          if (col.num) r = (typeof va === 'number' ? va : -Infinity) - (typeof vb === 'number' ? vb : -Infinity);
          else r = String(va).localeCompare(String(vb));
          if (isNaN(r)) r = 0;
          return state.desc ? -r : r;
        });
      }
      while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
      sorted.forEach(function (r) {
        var row = el('tr', rowClass ? rowClass(r) || null : null);
        columns.forEach(function (c) {
          var v = value(c, r);
          var td = el('td', c.num ? 'num' : (c.name ? 'name' : null), c.fmt ? c.fmt(v) : (c.num ? fmt(v) : (v === null || v === undefined ? '' : String(v))));
          if (c.num && typeof v === 'number') td.setAttribute('data-v', String(v));
          row.appendChild(td);
        });
        tbody.appendChild(row);
      });
      Array.prototype.forEach.call(tr.children, function (th) {
        if (th.getAttribute('data-key') === state.key) th.setAttribute('aria-sort', state.desc ? 'descending' : 'ascending');
        else th.removeAttribute('aria-sort');
      });
    }
    columns.forEach(function (c) {
      var th = el('th', c.num ? 'num' : null, c.label);
      th.setAttribute('data-key', c.key);
      th.addEventListener('click', function () {
        if (state.key === c.key) state.desc = !state.desc;
        else { state.key = c.key; state.desc = !!c.num; }
        fill();
      });
      tr.appendChild(th);
    });
    thead.appendChild(tr);
    t.appendChild(thead); t.appendChild(tbody);
    box.appendChild(t);
    fill();
    if (limitNote) box.parentNode.insertBefore(el('p', 'muted', limitNote), box.nextSibling);
  }

  function renderTables() {
    var lim = P.html_limits || {};
    var ops = P.ops || [];
    table('table-ops', [
      { key: 'name', label: 'operator', name: true },
      { key: 'kind', label: 'kind' },
      { key: 'calls', label: 'calls', num: true, fmt: function (v) { return String(v); } },
      { key: 'self_ms', label: 'self ms', num: true },
      { key: 'total_ms', label: 'total ms', num: true },
      { key: 'avg_us', label: 'avg us', num: true, get: function (r) { return r.calls ? 1000 * num(r.self_ms) / r.calls : 0; } },
      { key: 'shape', label: 'most frequent input shapes', name: true, get: function (r) { return r.shapes && r.shapes.length ? r.shapes[0].shapes : ''; } }
    ], ops, 'self_ms', lim.ops_rows > ops.length ? 'The ' + ops.length + ' heaviest of ' + lim.ops_rows + ' operators (profile.json has all).' : null);
    var py = P.python || [];
    var sampled = (P.run || {}).python_mode === 'sample';
    table('table-python', [
      { key: 'function', label: 'function', name: true },
      { key: 'where', label: 'file:line', name: true, get: function (r) { return r.file + ':' + r.line; } },
      { key: 'self_ms', label: 'self ms', num: true },
      { key: 'total_ms', label: 'total ms', num: true },
      sampled ? { key: 'self_samples', label: 'self samples', num: true, fmt: function (v) { return String(v); } }
              : { key: 'calls', label: 'calls', num: true, fmt: function (v) { return v === null ? '-' : String(v); } }
    ], py, 'self_ms', lim.python_rows > py.length ? 'The ' + py.length + ' heaviest of ' + lim.python_rows + ' functions (profile.json has all).' : null);
    table('table-layers', [
      { key: 'name', label: 'module', name: true },
      { key: 'type', label: 'type', name: true },
      { key: 'calls', label: 'calls', num: true, fmt: function (v) { return String(v); } },
      { key: 'forward_ms', label: 'forward ms', num: true },
      { key: 'backward_ms', label: 'backward ms', num: true },
      { key: 'params', label: 'parameters', num: true, fmt: function (v) { return String(v); } }
    ], P.layers || [], 'backward_ms', lim.layers_rows > (P.layers || []).length ? 'The first ' + (P.layers || []).length + ' of ' + lim.layers_rows + ' modules.' : null);
    var every = lim.per_step_every || 1;
    var per = (P.steps || {}).per_step || [];
    var t0 = per.length ? num(per[0].start_s) : 0;
    var steps = per.map(function (s, i) {
      var r = { step: i * every + 1, start_s: num(s.start_s) - t0, ms: s.ms, steady: s.steady ? 'yes' : 'warm-up/outlier' };
      PHASES.forEach(function (p) { r[p] = s.breakdown_ms ? num(s.breakdown_ms[p]) : 0; });
      return r;
    });
    table('table-steps', [
      { key: 'step', label: 'step', num: true, fmt: function (v) { return String(v); } },
      { key: 'start_s', label: 'start s (from step 1)', num: true, fmt: function (v) { return fmt(v, 3); } },
      { key: 'ms', label: 'ms', num: true },
      { key: 'steady', label: 'steady' }
    ].concat(PHASES.map(function (p) { return { key: p, label: p + ' ms', num: true }; })), steps, 'step',
      every > 1 ? 'One step in ' + every + ' (profile.json has all in the timeline window).' : null);
    var workers = (P.processes || []).filter(function (p) { return p.role !== 'main'; });
    if (workers.length) {
      var box = byId('workers');
      box.appendChild(el('h3', null, 'DataLoader worker processes'));
      var inner = el('div', 'table-wrap');
      inner.id = 'table-workers';
      box.appendChild(inner);
      table('table-workers', [
        { key: 'worker_id', label: 'worker', num: true, fmt: function (v) { return String(v); } },
        { key: 'pid', label: 'pid', num: true, fmt: function (v) { return String(v); } },
        { key: 'busy_pct', label: 'busy %', num: true },
        { key: 'batches', label: 'batches', num: true, fmt: function (v) { return String(v); } },
        { key: 'mean_batch_ms', label: 'mean batch ms', num: true },
        { key: 'top', label: 'hottest functions', name: true, get: function (r) { return (r.top_functions || []).slice(0, 3).join('; '); } }
      ], workers, 'worker_id');
    }
    var notes = byId('notes');
    var ns = P.notes || [];
    if (!ns.length) notes.appendChild(el('li', 'muted', 'None.'));
    ns.forEach(function (n) { notes.appendChild(el('li', null, n)); });
  }

  // --- GPU -----------------------------------------------------------------
  function renderGpu() {
    var g = P.gpu;
    if (!g) return;
    byId('s-gpu').hidden = false;
    var line = [g.device || '(no device properties)'];
    if (P.ranks && P.ranks.length > 1) line.unshift('rank ' + g.rank + ' of the ' + P.ranks.length + ' traces (profile.json\u2019s ranks[] has each)');
    if (typeof g.utilization === 'number') line.push('utilisation ' + fmt(100 * g.utilization, 1) + ' %');
    if (typeof g.sm_efficiency === 'number') line.push('est. SM efficiency ' + fmt(100 * g.sm_efficiency, 1) + ' %');
    if (typeof g.achieved_occupancy === 'number') line.push('est. achieved occupancy ' + fmt(g.achieved_occupancy, 1) + ' %');
    var tb = g.temporal_breakdown;
    if (tb) line.push('idle ' + fmt(tb.idle_time_pctg, 1) + ' %, compute ' + fmt(tb.compute_time_pctg, 1) + ' %, non-compute ' + fmt(tb.non_compute_time_pctg, 1) + ' % (HTA)');
    setText(byId('gpu-line'), line.join(' \u00b7 '));

    // utilisation over time: a step area
    var ubox = byId('chart-gpu-util');
    var dev = (g.devices || [])[0] || {};
    var tl = dev.util_timeline || [];
    if (tl.length < 2) empty(ubox, 'No utilisation timeline in this profile.');
    else {
      var W = widthOf(ubox), H = 160, left = 44, right = 12, top = 10, bottom = 26;
      var pw = W - left - right, ph = H - top - bottom;
      var t0 = tl[0][0], t1 = tl[tl.length - 1][0];
      var xs = function (t) { return left + ((t - t0) / Math.max(t1 - t0, 1e-9)) * pw; };
      var ys = function (u) { return top + ph - Math.min(Math.max(u, 0), 1) * ph; };
      var s = svgEl('svg', { width: W, height: H, role: 'img' });
      [0, 0.5, 1].forEach(function (f) {
        s.appendChild(svgEl('line', { x1: left, x2: left + pw, y1: ys(f), y2: ys(f), stroke: '#d8dee4' }));
        s.appendChild(svgEl('text', { x: left - 4, y: ys(f) + 4, 'text-anchor': 'end' }, (100 * f) + ' %'));
      });
      var d = 'M' + xs(t0) + ' ' + ys(0);
      for (var i = 0; i < tl.length; ++i) {
        d += ' L' + xs(tl[i][0]) + ' ' + ys(tl[i][1]);
        if (i + 1 < tl.length) d += ' L' + xs(tl[i + 1][0]) + ' ' + ys(tl[i][1]);
      }
      d += ' L' + xs(t1) + ' ' + ys(0) + ' Z';
      var path = svgEl('path', { d: d, fill: '#76b7b2', stroke: '#2e86c1', 'stroke-width': 1 });
      svgTitle(path, 'GPU busy fraction per ' + fmt(dev.util_bucket_ms) + ' ms bucket');
      s.appendChild(path);
      s.appendChild(svgEl('text', { x: left, y: H - 8 }, fmt(t0, 0) + ' ms'));
      s.appendChild(svgEl('text', { x: left + pw, y: H - 8, 'text-anchor': 'end' }, fmt(t1, 0) + ' ms'));
      ubox.appendChild(s);
    }

    // idle breakdown per stream: horizontal stacked bars
    var ibox = byId('chart-gpu-idle');
    var idle = g.idle_breakdown || [];
    var IDLE_KEYS = [['host_wait_us', 'host wait', '#e74c3c'], ['kernel_wait_us', 'kernel wait', '#f39c12'], ['other_us', 'other', '#95a5a6']];
    if (!idle.length) empty(ibox, 'No idle time breakdown (no GPU stream).');
    else {
      var W2 = widthOf(ibox), rowH = 22, lw = 110;
      var s2 = svgEl('svg', { width: W2, height: idle.length * rowH + 8, role: 'img' });
      var maxIdle = Math.max.apply(null, idle.map(function (x) { return num(x.host_wait_us) + num(x.kernel_wait_us) + num(x.other_us); }).concat([1e-9]));
      idle.forEach(function (x, i) {
        var yy = 4 + i * rowH, acc = 0;
        var g2 = svgEl('g');
        g2.appendChild(svgEl('text', { x: lw - 6, y: yy + 14, 'text-anchor': 'end' }, 'stream ' + x.stream));
        var tipParts = ['stream ' + x.stream];
        IDLE_KEYS.forEach(function (k) {
          var w = (num(x[k[0]]) / maxIdle) * (W2 - lw - 120);
          if (w > 0) g2.appendChild(svgEl('rect', { x: lw + acc, y: yy + 3, width: w, height: rowH - 6, fill: k[2] }));
          acc += w;
          tipParts.push(k[1] + ' ' + fmt(num(x[k[0]]) / 1e3) + ' ms');
        });
        g2.appendChild(svgEl('text', { x: lw + acc + 4, y: yy + 14 }, fmt((num(x.host_wait_us) + num(x.kernel_wait_us) + num(x.other_us)) / 1e3) + ' ms idle'));
        svgTitle(g2, tipParts.join('\n'));
        s2.appendChild(g2);
      });
      ibox.appendChild(s2);
      legend(ibox, IDLE_KEYS.map(function (k) { return { label: k[1], color: k[2] }; }));
    }

    // the TensorBoard plugin's step breakdown
    var sbox = byId('chart-gpu-steps');
    var sb = g.step_breakdown || [];
    var TB = ['Kernel', 'Memcpy', 'Memset', 'Communication', 'Runtime', 'DataLoader', 'CPU Exec', 'Other'];
    var TBC = { Kernel: '#2e86c1', Memcpy: '#8e44ad', Memset: '#c39bd3', Communication: '#16a085', Runtime: '#f1c40f', DataLoader: '#e74c3c', 'CPU Exec': '#e67e22', Other: '#95a5a6' };
    if (!sb.length) empty(sbox, 'No ProfilerStep ranges in this trace.');
    else stackedBars(sbox, sb, {
      keys: TB, colors: TBC, unit: 'ms',
      value: function (r, k) { return num(r[k]) / 1e3; },
      label: function (r) { return 'step ' + r.step; }
    });

    table('table-kernels', [
      { key: 'name', label: 'kernel', name: true },
      { key: 'calls', label: 'calls', num: true, fmt: function (v) { return String(v); } },
      { key: 'total_ms', label: 'total ms', num: true, get: function (r) { return num(r.total_us) / 1e3; } },
      { key: 'mean_us', label: 'mean us', num: true },
      { key: 'share', label: 'share %', num: true, get: function (r) { return 100 * num(r.share); }, fmt: function (v) { return fmt(v, 1); } },
      { key: 'tc', label: 'tensor cores', get: function (r) { return r.tensor_cores ? 'yes' : 'no'; } }
    ], g.top_kernels || [], 'total_ms');
  }

  // --- GPUs over the run (NVML) ----------------------------------------------
  // One line and one chart per GPU: utilisation and memory used (as a share
  // of the GPU's memory) on one 0..100 % axis, a gap where NVML read nothing.
  function renderNvml() {
    var nv = P.nvml;
    if (!nv || !nv.sampled || !(nv.devices || []).length) return;
    byId('s-nvml').hidden = false;
    var box = byId('nvml-devices');
    var MIB = 1024 * 1024;
    var SERIES = [
      { label: 'utilisation %', color: '#2e86c1', value: function (r) { return r[1]; } },
      { label: 'memory used, % of the GPU\u2019s total', color: '#e67e22', value: function (r, d) {
        return r[3] === null || !(d.memory_total_bytes > 0) ? null : 100 * r[3] / d.memory_total_bytes;
      } }
    ];
    nv.devices.forEach(function (d) {
      var line = ['GPU ' + d.index + ' (' + (d.name || 'unnamed') + ')'];
      line.push(typeof d.gpu_util_mean_pct === 'number' ? 'utilisation mean ' + fmt(d.gpu_util_mean_pct, 0) + ' %' : 'utilisation unknown');
      if (typeof d.gpu_util_steady_mean_pct === 'number') line.push('steady steps ' + fmt(d.gpu_util_steady_mean_pct, 0) + ' %');
      if (typeof d.memory_used_peak_bytes === 'number') line.push('peak memory ' + fmt(d.memory_used_peak_bytes / MIB, 0) + ' MiB' +
        (d.memory_total_bytes > 0 ? ' of ' + fmt(d.memory_total_bytes / MIB, 0) : ''));
      if (typeof d.power_mean_mw === 'number') line.push('power ' + fmt(d.power_mean_mw / 1000, 0) + ' W');
      if (typeof d.sm_clock_min_mhz === 'number' && d.sm_clock_max_mhz > d.sm_clock_min_mhz) line.push('SM clock ' + d.sm_clock_min_mhz + '..' + d.sm_clock_max_mhz + ' MHz');
      if (d.lost_ms !== null && d.lost_ms !== undefined) line.push('lost at ' + fmt(d.lost_ms / 1000, 2) + ' s');
      var p = el('p', 'nvml-line', line.join(' \u00b7 '));
      p.setAttribute('data-device', String(d.index));
      box.appendChild(p);
      var chart = el('div', 'chart');
      chart.id = 'chart-nvml-' + d.index;
      box.appendChild(chart);
      var rows = d.series || [];
      if (rows.length < 2) { empty(chart, 'Fewer than two samples of this GPU.'); return; }
      var W = widthOf(chart), H = 150, left = 44, right = 12, top = 10, bottom = 26;
      var pw = W - left - right, ph = H - top - bottom;
      var t0 = rows[0][0], t1 = rows[rows.length - 1][0];
      var xs = function (t) { return left + ((t - t0) / Math.max(t1 - t0, 1e-9)) * pw; };
      var ys = function (pct) { return top + ph - (Math.min(Math.max(pct, 0), 100) / 100) * ph; };
      var s = svgEl('svg', { width: W, height: H, role: 'img' });
      [0, 50, 100].forEach(function (f) {
        s.appendChild(svgEl('line', { x1: left, x2: left + pw, y1: ys(f), y2: ys(f), stroke: '#d8dee4' }));
        s.appendChild(svgEl('text', { x: left - 4, y: ys(f) + 4, 'text-anchor': 'end' }, f + ' %'));
      });
      SERIES.forEach(function (se) {
        var path = '', pen = false;
        rows.forEach(function (r) {
          var v = se.value(r, d);
          if (v === null || v === undefined) { pen = false; return; }
          path += (pen ? ' L' : ' M') + xs(r[0]).toFixed(1) + ' ' + ys(v).toFixed(1);
          pen = true;
        });
        if (!path) return;
        var e = svgEl('path', { d: path.trim(), fill: 'none', stroke: se.color, 'stroke-width': 1.5 });
        e.setAttribute('data-series', se.label);
        svgTitle(e, 'GPU ' + d.index + ': ' + se.label);
        s.appendChild(e);
      });
      s.appendChild(svgEl('text', { x: left, y: H - 8 }, fmt(t0 / 1000, 1) + ' s'));
      s.appendChild(svgEl('text', { x: left + pw, y: H - 8, 'text-anchor': 'end' }, fmt(t1 / 1000, 1) + ' s'));
      chart.appendChild(s);
      legend(chart, SERIES.map(function (se) { return { label: se.label, color: se.color }; }));
    });
  }

  // --- ranks of a distributed job --------------------------------------------
  // One row and one bar per rank, every bar on one scale: the straggler's own
  // time (data, compute) is the longer, the other ranks' collective wait is.
  var RANK_PARTS = [['data_ms', 'data', PHASE_COLORS.data], ['compute_ms', 'compute', PHASE_COLORS.forward],
    ['collective_wait_ms', 'collective wait', '#f1c40f'], ['collective_transfer_ms', 'transfer', '#16a085']];
  function intFmt(v) { return typeof v === 'number' ? String(v) : '-'; }
  function pctFmt(v) { return typeof v === 'number' && isFinite(v) ? fmt(100 * v, 1) : '-'; }
  function bytesFmt(b) {
    if (typeof b !== 'number' || !isFinite(b) || b < 0) return '-';
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
    while (b >= 1024 && i < units.length - 1) { b /= 1024; ++i; }
    return (i ? fmt(b, 2) : String(b)) + ' ' + units[i];
  }
  function renderRanks() {
    var ranks = (Array.isArray(P.ranks) ? P.ranks : []).filter(function (r) { return r && typeof r === 'object'; });
    // `torchneck analyze` of rank traces writes GPU-only entries (no steps): the GPU section has those.
    if (ranks.filter(function (r) { return typeof r.step_ms === 'number'; }).length < 2) return;
    byId('s-ranks').hidden = false;
    var named = {};  // rank -> the findings that name it
    (P.findings || []).forEach(function (f) {
      if (f && typeof f.rank === 'number') (named[f.rank] = named[f.rank] || []).push(String(f.id || 'finding') + (f.cause ? ' (' + f.cause + ')' : ''));
    });
    var ff = P.first_failure && typeof P.first_failure === 'object' ? P.first_failure : null;
    if (ff) {
      var fl = byId('ranks-failure');
      fl.hidden = false;
      setText(fl, 'FAILED: ' + (ff.text || 'rank ' + ff.rank + ' failed first'));
    }
    var nameOf = function (r) { return named[r.rank] ? named[r.rank].join(', ') : ''; };
    var failedFirst = function (r) { return ff !== null && ff.rank === r.rank; };
    var compared = function (r) { return typeof r.step_ms === 'number' && r.steps !== 0; };
    var label = function (r) { return 'rank ' + (typeof r.rank === 'number' ? r.rank : '?'); };
    var co = P.collectives && typeof P.collectives === 'object' ? P.collectives : {};
    var line = [ranks.length + ' ranks'];
    if (typeof co.steps_compared === 'number') line.push('the mean of ' + co.steps_compared + ' steps steady on every rank');
    line.push('ms per step: wait is in collectives for the last rank to arrive, transfer after it, both where none of the rank\u2019s own work overlapped');
    setText(byId('ranks-line'), line.join(' \u00b7 '));

    var box = byId('chart-ranks');
    var W = widthOf(box), rowH = 24, labelW = 170, plotW = Math.max(W - labelW - 260, 60);
    var max = Math.max.apply(null, ranks.map(function (r) {
      return RANK_PARTS.reduce(function (t, p) { return t + Math.max(0, num(r[p[0]])); }, 0);
    }).concat([1e-9]));
    var s = svgEl('svg', { width: W, height: ranks.length * rowH + 8, role: 'img' });
    ranks.forEach(function (r, i) {
      var yy = 4 + i * rowH, acc = 0, who = nameOf(r);
      var g = svgEl('g', { 'class': 'rank-bar' + (who ? ' named' : '') + (failedFirst(r) ? ' failed' : ''), 'data-rank': typeof r.rank === 'number' ? r.rank : '' });
      if (who || failedFirst(r)) g.appendChild(svgEl('rect', { x: 0, y: yy, width: W, height: rowH, 'class': 'rank-bg' }));
      g.appendChild(svgEl('text', { x: labelW - 6, y: yy + 16, 'text-anchor': 'end' }, truncate(label(r) + (r.host ? ' (' + r.host + ')' : ''), 26)));
      var tip = [label(r) + ': ' + (compared(r) ? fmtMs(r.step_ms) + ' a step' : 'no steps compared')];
      RANK_PARTS.forEach(function (p) {
        var v = Math.max(0, num(r[p[0]])), w = (v / max) * plotW;
        tip.push(p[1] + ' ' + fmtMs(v));
        if (w > 0) g.appendChild(svgEl('rect', { x: labelW + acc, y: yy + 4, width: w, height: rowH - 8, fill: p[2], 'data-key': p[0], 'data-ms': v }));
        acc += w;
      });
      var end = compared(r) ? fmtMs(r.step_ms) : 'no steps compared';
      if (who) end += ' \u2190 ' + who;
      if (failedFirst(r)) end += ' \u2190 failed first';
      g.appendChild(svgEl('text', { x: labelW + acc + 6, y: yy + 16, 'class': 'rank-end' }, end));
      svgTitle(g, tip.concat(who ? ['named by ' + who] : []).join('\n'));
      s.appendChild(g);
    });
    box.appendChild(s);
    legend(box, RANK_PARTS.map(function (p) { return { label: p[1], color: p[2] }; }));

    var gpu = ranks.some(function (r) { return r.gpu && typeof r.gpu.utilization === 'number'; });
    var offsets = ranks.some(function (r) { return num(r.clock_offset_ns) !== 0; });
    var cols = [
      { key: 'rank', label: 'rank', num: true, fmt: intFmt },
      { key: 'host', label: 'host', name: true },
      { key: 'ended', label: 'ended (exit status)', get: function (r) {
        if (typeof r.ending !== 'string') return '-';
        return (r.ending === '' ? 'no profile' : r.ending) + (typeof r.exit_code === 'number' ? ' (' + r.exit_code + ')' : '');
      } },
      { key: 'named', label: 'named by', get: function (r) { return [failedFirst(r) ? 'failed first' : '', nameOf(r)].filter(Boolean).join(', '); } },
      { key: 'steps', label: 'steps', num: true, fmt: intFmt },
      { key: 'step_ms', label: 'step ms', num: true },
      { key: 'data_ms', label: 'data ms', num: true },
      { key: 'compute_ms', label: 'compute ms', num: true },
      { key: 'collective_wait_ms', label: 'wait ms', num: true },
      { key: 'collective_transfer_ms', label: 'transfer ms', num: true },
      { key: 'last_arrival_share', label: 'last in %', num: true, fmt: pctFmt },
      { key: 'runqueue_share', label: 'run queue %', num: true, fmt: pctFmt },
      { key: 'collectives', label: 'collectives', num: true, fmt: intFmt },
      { key: 'collective_bytes', label: 'bytes', num: true, fmt: bytesFmt }
    ];
    if (offsets) cols.push({ key: 'clock_offset_ms', label: 'clock offset ms', num: true, get: function (r) { return typeof r.clock_offset_ns === 'number' ? r.clock_offset_ns / 1e6 : null; } });
    if (gpu) cols.push({ key: 'gpu_util', label: 'GPU utilisation %', num: true, fmt: pctFmt, get: function (r) { return r.gpu ? r.gpu.utilization : null; } });
    table('table-ranks', cols, ranks, null, null, function (r) {
      return [nameOf(r) ? 'rank-named' : '', failedFirst(r) ? 'rank-failed' : ''].join(' ').trim();
    });

    var cl = [];
    if (typeof co.matched === 'number') cl.push(co.matched + ' collectives matched on every rank (the k-th of a name on each)');
    if (co.clock) cl.push('clock: ' + co.clock);
    setText(byId('collectives-line'), cl.join(' \u00b7 '));
    var byName = Array.isArray(co.by_name) ? co.by_name : [];
    if (!byName.length) empty(byId('table-collectives'), 'No collective was recorded on every rank.');
    else table('table-collectives', [
      { key: 'name', label: 'collective', name: true },
      { key: 'calls', label: 'calls per rank', num: true, fmt: intFmt },
      { key: 'bytes_per_call', label: 'bytes per call', num: true, fmt: bytesFmt },
      { key: 'mean_ms', label: 'mean ms (arrival to completion)', num: true },
      { key: 'wait_ms', label: 'wait ms (to the last arrival)', num: true },
      { key: 'transfer_ms', label: 'transfer ms (after it)', num: true }
    ], byName, 'mean_ms');
    var notes = byId('ranks-notes');
    (Array.isArray(co.notes) ? co.notes : []).forEach(function (n) { notes.appendChild(el('li', null, n)); });
  }

  function guard(name, f) {
    try { f(); } catch (e) {
      // A broken section must not take the others with it; the console says which.
      if (window.console) console.error('torchneck report: ' + name + ': ' + e);
    }
  }
  guard('header', renderHeader);
  guard('verdict', renderVerdict);
  guard('steps', renderSteps);
  guard('layers', renderLayers);
  guard('flame', renderFlame);
  guard('gpu', renderGpu);
  guard('nvml', renderNvml);
  guard('ranks', renderRanks);
  guard('tables', renderTables);
  guard('toc', renderToc);
  document.documentElement.setAttribute('data-rendered', '1');
})();
