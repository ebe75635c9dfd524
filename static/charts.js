/* clrscope dashboard: the light/dark theme, a shared tooltip and tiny canvas charts.
 *
 *   theme(), onTheme(fn), tooltip: {show, hide}, fitCanvas(canvas, w, h), observeWidth(el, fn),
 *   niceStep(range, ticks), BarChart, sparkline(canvas, values, opts)
 *
 * TimeChart, the chart over time, is in time_chart.js.
 *
 * No libraries. Colours come from CSS variables so the charts follow the light/dark theme.
 */

import {hook} from './hook.js';
import * as fmt from './fmt.js';

/* ------------------------------------------------------------------ theme */

var themeCache = null;
var themeListeners = [];

export function theme() {
  if (themeCache) return themeCache;
  var cs = getComputedStyle(document.documentElement);
  function v(name) { return cs.getPropertyValue(name).trim(); }
  themeCache = {
    dark: window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches,
    bg: v('--panel'), fg: v('--fg'), muted: v('--muted'), faint: v('--faint'), grid: v('--grid'),
    axis: v('--axis'), accent: v('--accent'), warn: v('--warn'), err: v('--err'), match: v('--match'),
    series: [v('--s1'), v('--s2'), v('--s3'), v('--s4'), v('--s5'), v('--s6')],
    mono: v('--mono'), sans: v('--sans')
  };
  return themeCache;
}

export function onTheme(fn) { themeListeners.push(fn); }

if (window.matchMedia) {
  var mq = window.matchMedia('(prefers-color-scheme: dark)');
  var changed = function () {
    themeCache = null;
    // a listener that returns false (its chart left the page) is dropped
    themeListeners = themeListeners.filter(function (fn) {
      try {
        return fn() !== false;
      } catch (e) {
        hook.lastError = String(e && e.message || e);
        return false;
      }
    });
  };
  if (mq.addEventListener) mq.addEventListener('change', changed);
}

/* ------------------------------------------------------------------ tooltip */

var tipEl = null;

function tipNode() {
  if (!tipEl) {
    tipEl = document.createElement('div');
    tipEl.className = 'tooltip hidden';
    tipEl.id = 'tooltip';
    tipEl.setAttribute('role', 'tooltip');
    document.body.appendChild(tipEl);
  }
  return tipEl;
}

/* content: {title, rows: [[key, value], ...], hint} */
function showTip(clientX, clientY, content) {
  var el = tipNode();
  el.textContent = '';
  if (content.title) {
    var t = document.createElement('div');
    t.className = 'tt-title';
    t.textContent = content.title;
    el.appendChild(t);
  }
  (content.rows || []).forEach(function (r) {
    var row = document.createElement('div');
    row.className = 'tt-row';
    var k = document.createElement('span');
    k.className = 'k';
    k.textContent = r[0];
    var v = document.createElement('span');
    v.textContent = r[1];
    row.appendChild(k);
    row.appendChild(v);
    el.appendChild(row);
  });
  if (content.hint) {
    var h = document.createElement('div');
    h.className = 'tt-hint';
    h.textContent = content.hint;
    el.appendChild(h);
  }
  el.classList.remove('hidden');
  var w = el.offsetWidth;
  var hgt = el.offsetHeight;
  var x = clientX + 14;
  var y = clientY + 16;
  if (x + w > window.innerWidth - 8) x = Math.max(8, clientX - w - 14);
  if (y + hgt > window.innerHeight - 8) y = Math.max(8, clientY - hgt - 12);
  el.style.left = x + 'px';
  el.style.top = y + 'px';
}

function hideTip() {
  if (tipEl) tipEl.classList.add('hidden');
}

export var tooltip = {show: showTip, hide: hideTip};

/* ------------------------------------------------------------------ canvas helpers */

export function fitCanvas(canvas, w, h) {
  var dpr = window.devicePixelRatio || 1;
  var pw = Math.max(1, Math.round(w * dpr));
  var ph = Math.max(1, Math.round(h * dpr));
  if (canvas.width !== pw) canvas.width = pw;
  if (canvas.height !== ph) canvas.height = ph;
  canvas.style.width = w + 'px';
  canvas.style.height = h + 'px';
  var ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

export function niceStep(range, ticks) {
  if (!(range > 0)) return 1;
  var raw = range / ticks;
  var mag = Math.pow(10, Math.floor(Math.log10(raw)));
  var n = raw / mag;
  var step = n <= 1 ? 1 : n <= 2 ? 2 : n <= 2.5 ? 2.5 : n <= 5 ? 5 : 10;
  return step * mag;
}

export function observeWidth(el, fn) {
  var last = -1;
  var pending = false;
  function run() {
    pending = false;
    var w = el.clientWidth;
    if (w !== last && w > 0) {
      last = w;
      fn();
    }
  }
  if (window.ResizeObserver) {
    var ro = new ResizeObserver(function () {
      if (!pending) {
        pending = true;
        requestAnimationFrame(run);
      }
    });
    ro.observe(el);
    return function () { ro.disconnect(); };
  }
  window.addEventListener('resize', run);
  return function () { window.removeEventListener('resize', run); };
}

/* ------------------------------------------------------------------ BarChart */

/*
 * new BarChart(container, {height, yFormat, color})
 * chart.setData({labels: [...], values: [...], tips: [{title, rows}]})
 */
export function BarChart(container, opts) {
  this.opts = opts || {};
  this.el = document.createElement('div');
  this.el.className = 'chart';
  this.canvas = document.createElement('canvas');
  this.el.appendChild(this.canvas);
  container.appendChild(this.el);
  this.data = null;
  this.hover = -1;
  var self = this;
  this.canvas.addEventListener('mousemove', function (e) { self._move(e); });
  this.canvas.addEventListener('mouseleave', function () {
    self.hover = -1;
    hideTip();
    self.draw();
  });
  observeWidth(this.el, function () { self.draw(); });
  onTheme(function () {
    if (!self.el.isConnected) return false;
    self.draw();
  });
}

BarChart.prototype.setData = function (d) {
  this.data = d;
  this.draw();
};

BarChart.prototype.draw = function () {
  var w = this.el.clientWidth || 400;
  var h = this.opts.height || 160;
  var ctx = fitCanvas(this.canvas, w, h);
  var th = theme();
  ctx.clearRect(0, 0, w, h);
  ctx.font = '11px ' + th.sans;
  var d = this.data;
  if (!d || !d.values || !d.values.length) {
    ctx.fillStyle = th.muted;
    ctx.textAlign = 'center';
    ctx.fillText('no data', w / 2, h / 2);
    return;
  }
  var L = {l: 46, r: 8, t: 14, b: 20};
  var pw = w - L.l - L.r;
  var ph = h - L.t - L.b;
  var max = 0;
  d.values.forEach(function (v) { if (v > max) max = v; });
  var step = niceStep(max || 1, 3);
  max = Math.max(step, Math.ceil(max / step) * step);
  var yfmt = this.opts.yFormat || fmt.count;
  ctx.strokeStyle = th.grid;
  ctx.fillStyle = th.muted;
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (var yv = 0; yv <= max + step / 2; yv += step) {
    var yy = Math.round(L.t + ph - yv / max * ph) + 0.5;
    ctx.beginPath();
    ctx.moveTo(L.l, yy);
    ctx.lineTo(w - L.r, yy);
    ctx.stroke();
    ctx.fillText(yfmt(yv), L.l - 6, yy);
  }
  var n = d.values.length;
  var slot = pw / n;
  var bw = Math.max(2, Math.min(64, slot * 0.7));
  this._slots = {l: L.l, slot: slot, n: n};
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  // label every k-th bar when the labels would overlap
  var widest = 0;
  d.labels.forEach(function (s) { widest = Math.max(widest, ctx.measureText(s).width); });
  var every = Math.max(1, Math.ceil((widest + 6) / slot));
  var valuesFit = ctx.measureText('0000').width <= slot;
  for (var i = 0; i < n; i++) {
    var v = d.values[i];
    var bh = max > 0 ? v / max * ph : 0;
    var x = L.l + slot * i + (slot - bw) / 2;
    ctx.fillStyle = i === this.hover ? th.fg : this.opts.color || th.accent;
    ctx.globalAlpha = i === this.hover ? 0.7 : 0.85;
    ctx.fillRect(x, L.t + ph - bh, bw, bh);
    ctx.globalAlpha = 1;
    ctx.fillStyle = th.muted;
    if (i % every === 0) ctx.fillText(d.labels[i], L.l + slot * i + slot / 2, L.t + ph + 5);
    if (v > 0 && valuesFit) {
      ctx.textBaseline = 'bottom';
      ctx.fillStyle = th.fg;
      ctx.fillText(fmt.count(v), L.l + slot * i + slot / 2, L.t + ph - bh - 2);
      ctx.textBaseline = 'top';
    }
  }
};

BarChart.prototype._move = function (e) {
  if (!this._slots || !this.data) return;
  var r = this.canvas.getBoundingClientRect();
  var i = Math.floor((e.clientX - r.left - this._slots.l) / this._slots.slot);
  if (i < 0 || i >= this._slots.n) {
    this.hover = -1;
    hideTip();
  } else {
    this.hover = i;
    var tip = this.data.tips && this.data.tips[i];
    showTip(e.clientX, e.clientY, tip || {title: this.data.labels[i], rows: [['count', fmt.int(this.data.values[i])]]});
  }
  this.draw();
};

/* ------------------------------------------------------------------ sparkline */

export function sparkline(canvas, values, opts) {
  opts = opts || {};
  var w = canvas.clientWidth || canvas.parentNode.clientWidth || 200;
  var h = opts.height || canvas.clientHeight || 44;
  var ctx = fitCanvas(canvas, w, h);
  var th = theme();
  ctx.clearRect(0, 0, w, h);
  if (!values || values.length < 2) return;
  var max = opts.max || 0;
  values.forEach(function (v) { if (v > max) max = v; });
  if (!(max > 0)) max = 1;
  var col = opts.color || th.accent;
  function X(i) { return i / (values.length - 1) * (w - 2) + 1; }
  function Y(v) { return h - 2 - (v || 0) / max * (h - 4); }
  if (opts.ref != null && opts.ref < max) {
    ctx.strokeStyle = th.warn;
    ctx.setLineDash([3, 3]);
    ctx.beginPath();
    ctx.moveTo(0, Math.round(Y(opts.ref)) + 0.5);
    ctx.lineTo(w, Math.round(Y(opts.ref)) + 0.5);
    ctx.stroke();
    ctx.setLineDash([]);
  }
  ctx.beginPath();
  values.forEach(function (v, i) {
    if (i === 0) ctx.moveTo(X(i), Y(v));
    else ctx.lineTo(X(i), Y(v));
  });
  ctx.strokeStyle = col;
  ctx.lineWidth = 1.5;
  ctx.stroke();
  ctx.lineTo(X(values.length - 1), h);
  ctx.lineTo(X(0), h);
  ctx.closePath();
  ctx.globalAlpha = 0.15;
  ctx.fillStyle = col;
  ctx.fill();
  ctx.globalAlpha = 1;
}
