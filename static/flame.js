/* clrscope dashboard: canvas flame graph with a top-functions table.
 *
 * The layout follows async-profiler's flame.html (per-level arrays, binary-search hit testing,
 * labels only on wide boxes, regex search with "matched %", click to zoom, icicle toggle), with
 * boxes narrower than half a pixel merged into grey runs, so a 100k-frame tree redraws in a few
 * milliseconds. Written from scratch for clrscope; the approach is credited to async-profiler
 * (Apache-2.0).
 *
 * new FlameGraph(container, {onChange}) builds the widget:
 *   fg.setData(reply)      reply of GET /api/v1/flamegraph: {type, unit, total, root}
 *   fg.setState({q, zoom, icicle})   q = search regex, zoom = array of frame names below "all"
 *   fg.getState()
 *   onChange(state) fires when the user searches, zooms or flips the orientation.
 * The pure functions it draws with (flatten, top, match, findPath, layout, ...) are in
 * flame_model.js, which the unit tests load without a DOM; the table under the graph is
 * flame_top.js.
 */

import {hook} from './hook.js';
import {el} from './dom.js';
import {FlameTop} from './flame_top.js';
import * as F from './fmt.js';
import * as Charts from './charts.js';
import {MIN_PX, flatten, top, compile, match, findPath, pathOf, layout, hitTest, parts, shortName, diffStep} from './flame_model.js';

var ROW = 18;            // px per stack level
var MAX_CSS_HEIGHT = 6000;

/* ================================================================== colours */

function hash(s) {
  var h = 2166136261;
  for (var i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return h >>> 0;
}

/* Frame colours by origin: the app's own code warm, the .NET libraries cool, native and
 * runtime frames grey, GC green, the JIT's compilations violet; hue by namespace, lightness by method. Colours come from a
 * small fixed palette so a redraw fills one batched path per colour, not one per frame. */
var P_GREY = 0;          // 3 shades
var P_GC = 3;            // 2 shades
var P_COOL = 5;          // 8 hues x 3 shades
var P_WARM = 29;         // 12 hues x 3 shades
var P_MATCH = 65;
var P_DIM = 66;          // 4 shades
var P_MERGED = 70;
var P_DIFF = 75;         // 9 steps: P_DIFF + 4 + diffStep (-4 shrank .. 0 same .. 4 new)
var P_JIT = 84;           // 2 shades
var P_SIZE = 86;

function colorIndex(name) {
  var p = parts(name);
  var ns = p.length > 2 ? p.slice(0, -2).join('.') : p[0];
  var shade = hash(name) % 3;
  if (name.lastIndexOf('[JIT] ', 0) === 0) return P_JIT + shade % 2;         // "[JIT] compiling ..."
  if (name.charCodeAt(0) === 91 || name === 'all') return P_GREY + shade;       // "[native] ..."
  if (/^(Garbage Collector|GC\b)/.test(name)) return P_GC + shade % 2;
  if (/^(System|Microsoft|Internal|Interop|Windows)\b/.test(name)) return P_COOL + hash(ns) % 8 * 3 + shade;
  return P_WARM + hash(ns) % 12 * 3 + shade;
}

function palette(dark, match) {
  var pal = new Array(P_SIZE);
  var lum = dark ? [38, 42, 46] : [62, 67, 72];
  function hsl(h, s, l) { return 'hsl(' + h + ',' + s + '%,' + l + '%)'; }
  for (var k = 0; k < 3; k++) {
    pal[P_GREY + k] = hsl(220, 8, lum[k] + (dark ? 0 : 6));
    if (k < 2) pal[P_GC + k] = hsl(130, 42, lum[k]);
    if (k < 2) pal[P_JIT + k] = hsl(275, dark ? 30 : 40, lum[k]);
    for (var c = 0; c < 8; c++) pal[P_COOL + c * 3 + k] = hsl(185 + c * 6, dark ? 36 : 48, lum[k]);
    for (var w = 0; w < 12; w++) pal[P_WARM + w * 3 + k] = hsl(6 + w * 4, dark ? 58 : 80, lum[k]);
  }
  pal[P_MATCH] = match;
  for (var d = 0; d < 4; d++) pal[P_DIM + d] = hsl(220, dark ? 8 : 10, (dark ? 24 : 85) + d * 2);
  pal[P_MERGED] = dark ? 'rgba(160,170,185,0.35)' : 'rgba(120,130,145,0.35)';
  // a differential graph: blue where a frame's share fell, red where it grew
  for (var st = -4; st <= 4; st++) {
    var sat = [0, 35, 55, 70, 85][Math.abs(st)];
    var l = dark ? 34 + Math.abs(st) * 3 : 80 - Math.abs(st) * 7;
    pal[P_DIFF + 4 + st] = st === 0 ? hsl(220, 6, dark ? 36 : 80) : hsl(st < 0 ? 215 : 2, sat, l);
  }
  return pal;
}

/* ================================================================== widget */

function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export function FlameGraph(container, opts) {
  this.opts = opts || {};
  this.model = null;
  this.unit = 'count';
  this.z = 0;
  this.zoomPath = [];
  this.q = '';
  this.re = null;
  this.matched = null;
  this.icicle = false;
  this.hover = -1;
  this.selected = null;
  this.colors = null;
  this.topRows = null;
  this._build(container);
}

FlameGraph.prototype._build = function (container) {
  var self = this;
  var root = el('div', 'flame');
  var bar = el('div', 'flame-toolbar');
  this.search = el('input', 'search');
  this.search.type = 'search';
  this.search.placeholder = 'Search frames (regex)…';
  this.search.setAttribute('aria-label', 'search frames');
  this.search.spellcheck = false;
  this.matchedEl = el('span', 'matched');
  var right = el('div', 'right');
  var seg = el('div', 'seg');
  this.btnFlame = el('button', null, 'Flame');
  this.btnIcicle = el('button', null, 'Icicle');
  this.btnFlame.type = this.btnIcicle.type = 'button';
  seg.appendChild(this.btnFlame);
  seg.appendChild(this.btnIcicle);
  this.btnReset = el('button', 'btn', 'Reset zoom');
  this.btnReset.type = 'button';
  right.appendChild(seg);
  right.appendChild(this.btnReset);
  bar.appendChild(this.search);
  bar.appendChild(this.matchedEl);
  bar.appendChild(right);
  this.crumbs = el('div', 'crumbs hidden');
  this.box = el('div', 'flame-box');
  this.canvas = el('canvas', 'main');
  this.overlay = el('canvas', 'overlay');
  this.emptyEl = el('div', 'empty', 'Loading…');
  this.box.appendChild(this.canvas);
  this.box.appendChild(this.overlay);
  this.box.appendChild(this.emptyEl);
  this.foot = el('div', 'flame-foot');
  // what the colours mean (drawn at each render, in the theme's shades); not for a comparison
  this.key = el('div', 'flame-key');
  this.keySwatches = [['your code', P_WARM + 1], ['.NET', P_COOL + 1], ['native', P_GREY + 1],
    ['JIT', P_JIT], ['GC', P_GC]].map(function (k) {
    var item = el('span', 'key-item');
    var sw = el('span', 'swatch');
    item.appendChild(sw);
    item.appendChild(document.createTextNode(k[0]));
    self.key.appendChild(item);
    return [sw, k[1]];
  });
  root.appendChild(bar);
  root.appendChild(this.crumbs);
  root.appendChild(this.box);
  root.appendChild(this.foot);
  root.appendChild(this.key);
  this.topTable = new FlameTop(root, function (name) { self.selectFunction(name); });
  container.appendChild(root);
  this.root = root;

  var timer = 0;
  this.search.addEventListener('input', function () {
    clearTimeout(timer);
    timer = setTimeout(function () {
      self.selected = null;
      self._setSearch(self.search.value);
      self._changed();
    }, 120);
  });
  this.search.addEventListener('keydown', function (e) {
    if (e.key === 'Escape') {
      self.search.value = '';
      self.selected = null;
      self._setSearch('');
      self._changed();
    }
  });
  this.btnFlame.addEventListener('click', function () { self._setIcicle(false); });
  this.btnIcicle.addEventListener('click', function () { self._setIcicle(true); });
  this.btnReset.addEventListener('click', function () { self._zoomTo(0); });
  this.canvas.addEventListener('mousemove', function (e) { self._move(e); });
  this.canvas.addEventListener('mouseleave', function () { self._setHover(-1); Charts.tooltip.hide(); });
  this.canvas.addEventListener('click', function (e) {
    var i = self._hit(e);
    if (i >= 0) self._zoomTo(i);
  });
  Charts.observeWidth(this.box, function () { self.render(); });
  Charts.onTheme(function () {
    if (!self.root.isConnected) return false;
    self.colors = null;
    self.render();
  });
  this._syncButtons();
};

FlameGraph.prototype.getState = function () {
  return {q: this.q, zoom: this.zoomPath.slice(), icicle: this.icicle};
};

/* Applies state from the URL without firing onChange. */
FlameGraph.prototype.setState = function (st) {
  st = st || {};
  var q = st.q || '';
  if (this.search.value !== q) this.search.value = q;
  this.icicle = !!st.icicle;
  this.zoomPath = (st.zoom || []).slice();
  if (this.model) this.z = findPath(this.model, this.zoomPath);
  this._setSearch(q, true);
  this._syncButtons();
  this.render();
  this._markTopMatches();
};

FlameGraph.prototype._changed = function () {
  if (this.opts.onChange) this.opts.onChange(this.getState());
};

FlameGraph.prototype.setData = function (reply) {
  var rootNode = reply && reply.root ? reply.root : {name: 'all', value: 0, children: []};
  this.message = '';
  this.unit = reply && reply.unit || 'count';
  this.model = flatten(rootNode);
  // a differential tree (diffTree) and its windows' totals: colour by the change
  this.diff = this.model.a && reply.diff ? reply.diff : null;
  this.nodeColors = null;
  if (this.diff) {
    var nc = new Uint8Array(this.model.n);
    for (var di = 0; di < this.model.n; di++) {
      nc[di] = P_DIFF + 4 + diffStep(this.model.a[di], this.model.b[di], this.diff.ta, this.diff.tb);
    }
    this.nodeColors = nc;
  }
  if (reply && +reply.total > 0) this.grandTotal = +reply.total;
  else this.grandTotal = this.model.total;
  this.z = findPath(this.model, this.zoomPath);
  this.hover = -1;
  this.colors = null;
  this.topRows = top(this.model);
  this._setSearch(this.q, true);
  this.render();
  this._renderTop();
  hook.flameNodes = this.model.n;
};

FlameGraph.prototype.clear = function (message) {
  this.model = null;
  this.topRows = null;
  this.message = message || '';
  this.emptyEl.textContent = message || '';
  this.emptyEl.classList.remove('hidden');
  this.render();
  this._renderTop();
};

FlameGraph.prototype._setSearch = function (q, quiet) {
  this.q = q || '';
  this.re = compile(this.q);
  this.matched = this.re && this.model ? match(this.model, this.re, this.z) : null;
  this.colors = null;
  this._matchedText();
  if (!quiet) {
    this.render();
    this._markTopMatches();
  }
};

FlameGraph.prototype._matchedText = function () {
  if (!this.matched || !this.model) {
    this.matchedEl.textContent = '';
    return;
  }
  var tot = this.grandTotal || this.model.total || 1;
  var s = 'matched ' + F.pct(this.matched.value / tot) + ' of total (' +
    F.unit(this.matched.value, this.unit) + ')';
  if (this.z > 0 && this.model.width[this.z] > 0) {
    s += ', ' + F.pct(this.matched.inView / this.model.width[this.z]) + ' of view';
  }
  this.matchedEl.textContent = s;
};

FlameGraph.prototype._setIcicle = function (on) {
  this.icicle = on;
  this._syncButtons();
  this.render();
  this._changed();
};

FlameGraph.prototype._syncButtons = function () {
  this.btnFlame.classList.toggle('on', !this.icicle);
  this.btnIcicle.classList.toggle('on', this.icicle);
  this.btnFlame.setAttribute('aria-pressed', String(!this.icicle));
  this.btnIcicle.setAttribute('aria-pressed', String(this.icicle));
};

FlameGraph.prototype._zoomTo = function (i) {
  if (!this.model) return;
  this.z = i;
  this.zoomPath = pathOf(this.model, i);
  this.hover = -1;
  Charts.tooltip.hide();
  if (this.re) this.matched = match(this.model, this.re, this.z);
  this._matchedText();
  this.render();
  this._changed();
};

FlameGraph.prototype._rows = function () {
  var m = this.model;
  var z = this.z;
  var maxLv = m.level[z];
  for (var i = z; i < m.end[z]; i++) if (m.level[i] > maxLv) maxLv = m.level[i];
  var cap = Math.floor(MAX_CSS_HEIGHT / ROW);
  return {maxLevel: Math.min(maxLv, cap - 1), hidden: Math.max(0, maxLv + 1 - cap)};
};

/* Palette index per name (depends on the search), computed once per model and search. */
FlameGraph.prototype._colorsFor = function () {
  if (this.colors) return this.colors;
  var m = this.model;
  var hit = this.matched ? this.matched.hit : null;
  var out = new Uint8Array(m.names.length);
  for (var j = 0; j < m.names.length; j++) {
    if (hit) out[j] = hit[j] ? P_MATCH : P_DIM + hash(m.names[j]) % 4;
    else out[j] = colorIndex(m.names[j]);
  }
  this.colors = out;
  return out;
};

FlameGraph.prototype.render = function () {
  var w = this.box.clientWidth;
  if (!w) return;
  var m = this.model;
  this.overlay.width = this.overlay.width; // clears the hover outline
  if (!m || m.n <= 1 || !(m.total > 0)) {
    var ctx0 = Charts.fitCanvas(this.canvas, w, 60);
    Charts.fitCanvas(this.overlay, w, 60);
    ctx0.clearRect(0, 0, w, 60);
    if (m) this.emptyEl.textContent = 'No samples in this window.';
    this.emptyEl.classList.remove('hidden');
    this.foot.textContent = '';
    this.crumbs.classList.add('hidden');
    this.btnReset.disabled = true;
    return;
  }
  this.emptyEl.classList.add('hidden');
  var t0 = performance.now();
  var th = Charts.theme();
  var dark = th.dark;
  var rows = this._rows();
  var nrows = rows.maxLevel + 1;
  var h = nrows * ROW;
  this._nrows = nrows;
  var ctx = Charts.fitCanvas(this.canvas, w, h);
  Charts.fitCanvas(this.overlay, w, h);
  ctx.clearRect(0, 0, w, h);
  var colors = this._colorsFor();
  var byNode = this.matched ? null : this.nodeColors; // a search colours by name
  var pal = palette(dark, th.match);
  var font = '11.5px ' + (th.mono || 'monospace');
  ctx.font = font;
  ctx.textBaseline = 'middle';
  var charW = ctx.measureText('MMMMMMMMMM').width / 10 || 7;
  var textColor = dark ? '#eef1f5' : '#1b1f27';
  var mutedText = th.muted;
  var icicle = this.icicle;
  var names = m.names;
  var nameIdx = m.name;
  var labels = [];
  var ancestors = [];
  var buckets = this._buckets || (this._buckets = []);
  for (var b = 0; b < P_SIZE; b++) {
    if (buckets[b]) buckets[b].length = 0;
    else buckets[b] = [];
  }
  var n = layout(m, this.z, w, rows.maxLevel, function (kind, i, lv, x, bw) {
    var y = icicle ? lv * ROW : (nrows - 1 - lv) * ROW;
    if (kind === 1) {
      buckets[P_MERGED].push(x, y, bw);
      return;
    }
    if (kind === 2) ancestors.push(i, y);
    else buckets[byNode ? byNode[i] : colors[nameIdx[i]]].push(x, y, bw > 2 ? bw - 1 : bw);
    if (bw >= charW * 3 + 6) labels.push(i, x, y, bw, kind);
  });
  // one path per colour
  for (b = 0; b < P_SIZE; b++) {
    var r = buckets[b];
    if (!r.length) continue;
    ctx.fillStyle = pal[b];
    ctx.beginPath();
    for (var q = 0; q < r.length; q += 3) ctx.rect(r[q], r[q + 1], r[q + 2], ROW - 1);
    ctx.fill();
  }
  ctx.globalAlpha = 0.55;
  for (q = 0; q < ancestors.length; q += 2) {
    ctx.fillStyle = pal[byNode ? byNode[ancestors[q]] : colors[nameIdx[ancestors[q]]]];
    ctx.fillRect(0, ancestors[q + 1], w - 1, ROW - 1);
  }
  ctx.globalAlpha = 1;
  // labels in a second pass: one fillStyle switch instead of one per box
  for (var k = 0; k < labels.length; k += 5) {
    var i = labels[k];
    var avail = Math.floor((labels[k + 3] - 6) / charW);
    var full = names[nameIdx[i]];
    var text = full;
    if (text.length > avail) {
      text = shortName(full);
      if (text.length > avail) text = avail >= 3 ? text.slice(0, avail - 1) + '…' : '';
    }
    if (!text) continue;
    var hit = this.matched && this.matched.hit[nameIdx[i]];
    ctx.fillStyle = labels[k + 4] === 2 ? mutedText : hit ? '#ffffff' : textColor;
    ctx.fillText(text, labels[k + 1] + 3, labels[k + 2] + (ROW - 1) / 2 + 0.5);
  }
  var ms = performance.now() - t0;
  hook.framesDrawn = n;
  hook.lastRenderMs = Math.round(ms * 10) / 10;
  hook.renders = (hook.renders || 0) + 1;
  hook.flame = {rows: nrows, rowHeight: ROW, icicle: icicle, zoom: this.zoomPath.slice()};
  var foot = F.int(m.n) + ' frames · ' + F.int(n) + ' drawn · ' +
    (this.diff ? '' : 'total ' + F.unit(this.grandTotal, this.unit) + ' · ') +
    'rendered in ' + ms.toFixed(1) + ' ms';
  if (rows.hidden) foot += ' · ' + rows.hidden + ' deeper levels not shown (zoom in)';
  this.foot.textContent = foot + ' · click a frame to zoom';
  this.key.classList.toggle('hidden', !!this.diff);
  this.keySwatches.forEach(function (k) { k[0].style.background = pal[k[1]]; });
  this._renderCrumbs();
  if (this.hover >= 0) this._drawHover();
};

FlameGraph.prototype._renderCrumbs = function () {
  var self = this;
  var m = this.model;
  this.crumbs.textContent = '';
  if (!m || this.z === 0) {
    this.crumbs.classList.add('hidden');
    this.btnReset.disabled = true;
    return;
  }
  this.btnReset.disabled = false;
  this.crumbs.classList.remove('hidden');
  var chain = [];
  for (var i = this.z; i >= 0; i = m.parent[i]) chain.push(i);
  chain.reverse();
  var shown = chain;
  if (chain.length > 9) shown = chain.slice(0, 2).concat([-1]).concat(chain.slice(-6));
  shown.forEach(function (idx, k) {
    if (k > 0) self.crumbs.appendChild(el('span', 'sep', '›'));
    if (idx === -1) {
      self.crumbs.appendChild(el('span', 'sep', '…'));
      return;
    }
    var label = idx === 0 ? 'all' : shortName(m.names[m.name[idx]]);
    if (idx === self.z) {
      var cur = el('span', 'cur', label);
      cur.title = m.names[m.name[idx]];
      self.crumbs.appendChild(cur);
      return;
    }
    var a = el('a', null, label);
    a.title = m.names[m.name[idx]];
    a.tabIndex = 0;
    a.addEventListener('click', function () { self._zoomTo(idx); });
    a.addEventListener('keydown', function (e) { if (e.key === 'Enter') self._zoomTo(idx); });
    self.crumbs.appendChild(a);
  });
};

FlameGraph.prototype._hit = function (e) {
  var m = this.model;
  if (!m || !this._nrows) return -1;
  var r = this.canvas.getBoundingClientRect();
  var x = e.clientX - r.left;
  var y = e.clientY - r.top;
  var row = Math.floor(y / ROW);
  var lv = this.icicle ? row : this._nrows - 1 - row;
  var w = r.width || 1;
  var scale = w / (m.width[this.z] || 1);
  var xv = m.left[this.z] + x / scale;
  return hitTest(m, this.z, lv, xv, MIN_PX / scale);
};

FlameGraph.prototype._setHover = function (i) {
  if (i === this.hover) return;
  this.hover = i;
  this.overlay.width = this.overlay.width;
  if (i >= 0) this._drawHover();
};

FlameGraph.prototype._drawHover = function () {
  var m = this.model;
  var i = this.hover;
  if (!m || i < 0 || i >= m.n) return;
  var w = this.box.clientWidth;
  var ctx = this.overlay.getContext('2d');
  var dpr = window.devicePixelRatio || 1;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  var scale = w / (m.width[this.z] || 1);
  var x;
  var bw;
  if (m.level[i] < m.level[this.z]) {
    x = 0;
    bw = w;
  } else {
    x = (m.left[i] - m.left[this.z]) * scale;
    bw = m.width[i] * scale;
  }
  var lv = m.level[i];
  var y = this.icicle ? lv * ROW : (this._nrows - 1 - lv) * ROW;
  ctx.strokeStyle = Charts.theme().fg;
  ctx.lineWidth = 1.5;
  ctx.strokeRect(x + 0.75, y + 0.75, Math.max(1, bw - 2.5), ROW - 2.5);
};

FlameGraph.prototype._move = function (e) {
  var i = this._hit(e);
  this._setHover(i);
  if (i < 0) {
    Charts.tooltip.hide();
    return;
  }
  var m = this.model;
  var tot = this.grandTotal || m.total || 1;
  var rows = [
    ['total (inclusive)', F.unit(m.width[i], this.unit) + '  ·  ' + F.pct(m.width[i] / tot)],
    ['self', F.unit(m.self[i], this.unit) + '  ·  ' + F.pct(m.self[i] / tot)]
  ];
  if (this.diff) { // the windows' own values and shares, not the drawn width
    var d = this.diff;
    var sa = d.ta > 0 ? m.a[i] / d.ta : 0, sb = d.tb > 0 ? m.b[i] / d.tb : 0;
    rows = [
      [d.labelA || 'before', F.unit(m.a[i], this.unit) + '  ·  ' + F.pct(sa)],
      [d.labelB || 'after', F.unit(m.b[i], this.unit) + '  ·  ' + F.pct(sb)],
      ['change', (sb >= sa ? '+' : '−') + F.pct(Math.abs(sb - sa)) + ' of total' +
        (sa > 0 ? '  ·  ×' + F.sig(sb / sa) : sb > 0 ? '  ·  new' : '')]
    ];
  } else if (this.z > 0 && m.level[i] >= m.level[this.z]) {
    rows.push(['of view', F.pct(m.width[i] / (m.width[this.z] || 1))]);
  }
  if (i > 0) {
    var p = m.parent[i];
    rows.push(['of parent', F.pct(m.width[i] / (m.width[p] || 1))]);
  }
  if (m.samples && !this.diff) rows.push(['95% interval', intervalText(m.width[i], m.samples[i], this.unit)]);
  rows.push(['depth', String(m.level[i])]);
  Charts.tooltip.show(e.clientX, e.clientY, {
    title: m.names[m.name[i]],
    rows: rows,
    hint: i === this.z ? (i ? 'zoomed here' : '') : 'click to zoom'
  });
};

/* An estimate's 95% interval from the samples behind it: k samples are a Poisson count, off by
 * about 1.96/√k (as /api/v1/allocations' bytes_ci95). */
function intervalText(value, k, unit) {
  if (!(k > 0)) return 'no samples';
  var rel = 1.96 / Math.sqrt(k);
  return F.unit(value * Math.max(0, 1 - rel), unit) + ' – ' + F.unit(value * (1 + rel), unit) +
    '  ·  ±' + F.pct(rel) + ' (' + F.int(k) + (k === 1 ? ' sample)' : ' samples)');
}

/* ---------------------------------------------------------------- top table */

FlameGraph.prototype._renderTop = function () {
  var m = this.model;
  this.topTable.setRows(this.topRows, m ? this.grandTotal || m.total || 1 : 1, this.unit,
    m ? 'No samples in this window.' : this.message ? '–' : 'Loading…');
  this._markTopMatches();
};

FlameGraph.prototype._markTopMatches = function () {
  this.topTable.mark(this.re, this.selected);
};

/* Highlights every frame of one function (exact name), as a click on its table row does. */
FlameGraph.prototype.selectFunction = function (name) {
  if (this.selected === name) {
    this.selected = null;
    this.search.value = '';
    this._setSearch('');
  } else {
    this.selected = name;
    var q = '^' + escapeRe(name) + '$';
    this.search.value = q;
    this._setSearch(q);
  }
  this._changed();
};
