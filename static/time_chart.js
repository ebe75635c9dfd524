/* clrscope dashboard: TimeChart, a canvas chart of values over time (GC share, heap by
 * generation, live objects), with a cursor that shows every series at the nearest time and
 * markers (the GC view's collections) with tooltips of their own.
 *
 * Colours, the tooltip and the canvas helpers come from charts.js.
 */

import * as fmt from './fmt.js';
import {hook} from './hook.js';
import {theme, onTheme, tooltip, fitCanvas, niceStep, observeWidth} from './charts.js';

function niceBytesStep(range, ticks) {
  // powers of two times 1, 2, 5 so byte axes read 256 MiB, 512 MiB ...
  if (!(range > 0)) return 1;
  var raw = range / ticks;
  var base = Math.pow(1024, Math.floor(Math.log(raw) / Math.log(1024)));
  return niceStep(raw / base * ticks, ticks) * base;
}

// seconds between time labels: at most `most` labels (6 when the width allows)
function timeStep(span, most) {
  var steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];
  var n = Math.min(6, most || 6);
  for (var i = 0; i < steps.length; i++) {
    if (span / steps[i] <= n) return steps[i];
  }
  return 7200;
}

/*
 * new TimeChart(container, {height, yFormat, stacked, yMax, title})
 * chart.setData({x: [unix s...], series: [{name, color?, values: [...]}],
 *                markers: [{x, v, color, info: {title, rows}}], marks: [{t, label}], xMin, xMax})
 * Lines, or stacked areas with `stacked: true`. Markers are short bars standing on the x axis
 * (height proportional to v) with their own tooltip; marks (/api/v1/marks) dashed lines across
 * the whole height with their label; the cursor otherwise shows all series at the nearest x.
 */
export function TimeChart(container, opts) {
  this.opts = opts || {};
  this.el = document.createElement('div');
  this.el.className = 'chart';
  this.canvas = document.createElement('canvas');
  this.el.appendChild(this.canvas);
  this.legend = document.createElement('div');
  this.legend.className = 'legend';
  container.appendChild(this.el);
  container.appendChild(this.legend);
  this.data = null;
  this.hover = null;
  var self = this;
  this.canvas.addEventListener('mousemove', function (e) { self._move(e); });
  this.canvas.addEventListener('mouseleave', function () {
    self.hover = null;
    tooltip.hide();
    self.draw();
  });
  this._unobserve = observeWidth(this.el, function () { self.draw(); });
  onTheme(function () {
    if (!self.el.isConnected) return false;
    self.draw();
  });
}

TimeChart.prototype.setData = function (d) {
  this.data = d;
  this._legend();
  this.draw();
};

TimeChart.prototype._color = function (s, i) {
  var th = theme();
  return s.color || th.series[i % th.series.length];
};

TimeChart.prototype._legend = function () {
  var self = this;
  this.legend.textContent = '';
  var d = this.data;
  if (!d || !d.series || d.series.length < 2 && !this.opts.legend) return;
  d.series.forEach(function (s, i) {
    var item = document.createElement('span');
    var sw = document.createElement('span');
    sw.className = 'sw';
    sw.style.background = self._color(s, i);
    item.appendChild(sw);
    item.appendChild(document.createTextNode(s.name));
    self.legend.appendChild(item);
  });
};

TimeChart.prototype._layout = function () {
  var w = this.el.clientWidth || 600;
  var h = this.opts.height || 180;
  return {w: w, h: h, l: 58, r: 12, t: 10, b: 22};
};

TimeChart.prototype.draw = function () {
  var L = this._layout();
  var ctx = fitCanvas(this.canvas, L.w, L.h);
  var th = theme();
  ctx.clearRect(0, 0, L.w, L.h);
  var d = this.data;
  var yfmt = this.opts.yFormat || fmt.sig;
  ctx.font = '11px ' + th.sans;
  if (!d || !d.x || !d.x.length) {
    ctx.fillStyle = th.muted;
    ctx.textAlign = 'center';
    ctx.fillText(this.opts.emptyText || 'no data in this window', L.w / 2, L.h / 2);
    return;
  }
  var n = d.x.length;
  var xMin = d.xMin != null ? d.xMin : d.x[0];
  var xMax = d.xMax != null ? d.xMax : d.x[n - 1];
  if (xMax <= xMin) xMax = xMin + 1;
  var stacked = !!this.opts.stacked;
  var yMax = 0;
  var i, j, s;
  for (i = 0; i < n; i++) {
    var sum = 0;
    for (j = 0; j < d.series.length; j++) {
      var v = d.series[j].values[i];
      if (v == null || !isFinite(v)) continue;
      if (stacked) sum += v;
      else if (v > yMax) yMax = v;
    }
    if (stacked && sum > yMax) yMax = sum;
  }
  if (this.opts.yMin != null && yMax < this.opts.yMin) yMax = this.opts.yMin;
  if (this.opts.yMax != null) yMax = this.opts.yMax;
  if (d.refLine != null && d.refLine * 1.1 > yMax) yMax = d.refLine * 1.1;
  if (!(yMax > 0)) yMax = 1;
  var step = this.opts.bytes ? niceBytesStep(yMax, 4) : niceStep(yMax, 4);
  yMax = Math.ceil(yMax / step - 1e-9) * step;
  var pw = L.w - L.l - L.r;
  var ph = L.h - L.t - L.b;
  function X(t) { return L.l + (t - xMin) / (xMax - xMin) * pw; }
  function Y(v) { return L.t + ph - v / yMax * ph; }
  this._X = X;
  this._L = L;
  this._range = [xMin, xMax];

  // grid + y labels
  ctx.strokeStyle = th.grid;
  ctx.fillStyle = th.muted;
  ctx.lineWidth = 1;
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (var yv = 0; yv <= yMax + step / 2; yv += step) {
    var yy = Math.round(Y(yv)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(L.l, yy);
    ctx.lineTo(L.w - L.r, yy);
    ctx.stroke();
    ctx.fillText(yfmt(yv), L.l - 6, yy);
  }
  // x labels
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  // as many labels as fit side by side (a narrow window: fewer, never overlapping)
  var room = (L.w - L.r - L.l) / (ctx.measureText(fmt.time(xMax)).width + 16);
  var ts = timeStep(xMax - xMin, Math.max(1, Math.floor(room)));
  for (var tv = Math.ceil(xMin / ts) * ts; tv <= xMax; tv += ts) {
    var xx = X(tv);
    if (xx < L.l + 14 || xx > L.w - L.r - 14) continue;
    ctx.fillText(fmt.time(tv), xx, L.t + ph + 5);
  }
  // reference line (e.g. the GC warning threshold)
  if (d.refLine != null) {
    ctx.save();
    ctx.strokeStyle = th.warn;
    ctx.setLineDash([4, 4]);
    var ry = Math.round(Y(d.refLine)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(L.l, ry);
    ctx.lineTo(L.w - L.r, ry);
    ctx.stroke();
    ctx.restore();
  }

  // series
  ctx.save();
  ctx.beginPath();
  ctx.rect(L.l, L.t - 1, pw, ph + 2);
  ctx.clip();
  if (stacked) {
    var base = new Float64Array(n);
    for (j = 0; j < d.series.length; j++) {
      s = d.series[j];
      var col = this._color(s, j);
      var top = new Float64Array(n);
      for (i = 0; i < n; i++) top[i] = base[i] + (+s.values[i] || 0);
      ctx.beginPath();
      for (i = 0; i < n; i++) {
        if (i === 0) ctx.moveTo(X(d.x[i]), Y(top[i]));
        else ctx.lineTo(X(d.x[i]), Y(top[i]));
      }
      for (i = n - 1; i >= 0; i--) ctx.lineTo(X(d.x[i]), Y(base[i]));
      ctx.closePath();
      ctx.globalAlpha = 0.55;
      ctx.fillStyle = col;
      ctx.fill();
      ctx.globalAlpha = 1;
      ctx.strokeStyle = col;
      ctx.lineWidth = 1.2;
      ctx.beginPath();
      for (i = 0; i < n; i++) {
        if (i === 0) ctx.moveTo(X(d.x[i]), Y(top[i]));
        else ctx.lineTo(X(d.x[i]), Y(top[i]));
      }
      ctx.stroke();
      base = top;
    }
  } else {
    for (j = 0; j < d.series.length; j++) {
      s = d.series[j];
      ctx.strokeStyle = this._color(s, j);
      ctx.lineWidth = 1.6;
      ctx.lineJoin = 'round';
      ctx.beginPath();
      var pen = false;
      for (i = 0; i < n; i++) {
        var val = s.values[i];
        if (val == null || !isFinite(val)) {
          pen = false;
          continue;
        }
        if (!pen) ctx.moveTo(X(d.x[i]), Y(val));
        else ctx.lineTo(X(d.x[i]), Y(val));
        pen = true;
      }
      ctx.stroke();
      // a point with no neighbour draws no line: mark it with a dot
      ctx.fillStyle = this._color(s, j);
      for (i = 0; i < n; i++) {
        var pv = s.values[i];
        if (pv == null || !isFinite(pv)) continue;
        var lone = (i === 0 || s.values[i - 1] == null) && (i === n - 1 || s.values[i + 1] == null);
        if (!lone) continue;
        ctx.beginPath();
        ctx.arc(X(d.x[i]), Y(pv), 2.5, 0, Math.PI * 2);
        ctx.fill();
      }
      if (this.opts.fill && d.series.length === 1) {
        ctx.lineTo(X(d.x[n - 1]), Y(0));
        ctx.lineTo(X(d.x[0]), Y(0));
        ctx.closePath();
        ctx.globalAlpha = 0.12;
        ctx.fillStyle = this._color(s, j);
        ctx.fill();
        ctx.globalAlpha = 1;
      }
    }
  }
  ctx.restore();

  // markers: bars standing on the x axis
  var markers = d.markers || [];
  var mMax = 0;
  markers.forEach(function (m) { if (m.v > mMax) mMax = m.v; });
  this._markers = [];
  for (i = 0; i < markers.length; i++) {
    var m = markers[i];
    var mx = Math.round(X(m.x)) + 0.5;
    if (mx < L.l || mx > L.w - L.r) continue;
    var mh = Math.max(3, (mMax > 0 ? m.v / mMax : 0) * ph * 0.3);
    ctx.strokeStyle = m.color || th.err;
    ctx.lineWidth = this.hover && this.hover.marker === m ? 3 : 2;
    ctx.beginPath();
    ctx.moveTo(mx, L.t + ph);
    ctx.lineTo(mx, L.t + ph - mh);
    ctx.stroke();
    this._markers.push({x: mx, m: m});
  }

  // marks: moments a user named, dashed across the plot, labelled at the top
  var drawn = 0;
  ctx.save();
  ctx.setLineDash([4, 3]);
  ctx.textAlign = 'left';
  ctx.textBaseline = 'top';
  (d.marks || []).forEach(function (mk) {
    var kx = Math.round(X(mk.t)) + 0.5;
    if (kx < L.l || kx > L.w - L.r) return;
    ctx.strokeStyle = th.muted;
    ctx.lineWidth = this.hover && this.hover.mark === mk ? 2 : 1;
    ctx.beginPath();
    ctx.moveTo(kx, L.t);
    ctx.lineTo(kx, L.t + ph);
    ctx.stroke();
    ctx.fillStyle = th.muted;
    var text = mk.label || 'mark';
    if (text.length > 24) text = text.slice(0, 23) + '…';
    ctx.fillText(text, kx + 3 + ctx.measureText(text).width > L.w - L.r ? kx - 3 - ctx.measureText(text).width : kx + 3, L.t + 1);
    this._markers.push({x: kx, mark: mk});
    drawn++;
  }, this);
  ctx.restore();
  hook.marksDrawn = drawn;

  // cursor
  if (this.hover && this.hover.index != null) {
    var hx = Math.round(X(d.x[this.hover.index])) + 0.5;
    ctx.strokeStyle = th.axis;
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(hx, L.t);
    ctx.lineTo(hx, L.t + ph);
    ctx.stroke();
    var acc = 0;
    for (j = 0; j < d.series.length; j++) {
      var hv = d.series[j].values[this.hover.index];
      if (hv == null || !isFinite(hv)) continue;
      acc = stacked ? acc + hv : hv;
      ctx.fillStyle = this._color(d.series[j], j);
      ctx.beginPath();
      ctx.arc(hx, Y(acc), 3, 0, Math.PI * 2);
      ctx.fill();
    }
  }
};

TimeChart.prototype._move = function (e) {
  var d = this.data;
  if (!d || !d.x || !d.x.length || !this._X) return;
  var r = this.canvas.getBoundingClientRect();
  var px = e.clientX - r.left;
  var best = null;
  var bestDist = 5;
  (this._markers || []).forEach(function (mk) {
    var dist = Math.abs(mk.x - px);
    if (dist <= bestDist) {
      bestDist = dist;
      best = mk.m || null;
      if (mk.mark) best = {mark: mk.mark};
    }
  });
  if (best && best.mark) {
    this.hover = {mark: best.mark};
    this.draw();
    tooltip.show(e.clientX, e.clientY, {title: best.mark.label || 'mark',
      rows: [['mark', fmt.time(best.mark.t)]]});
    return;
  }
  if (best) {
    this.hover = {marker: best};
    this.draw();
    tooltip.show(e.clientX, e.clientY, best.info || {title: 'marker'});
    return;
  }
  var L = this._L;
  var t = this._range[0] + (px - L.l) / (L.w - L.l - L.r) * (this._range[1] - this._range[0]);
  var lo = 0;
  var hi = d.x.length - 1;
  while (lo < hi) {
    var mid = (lo + hi) >> 1;
    if (d.x[mid] < t) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && Math.abs(d.x[lo - 1] - t) < Math.abs(d.x[lo] - t)) lo--;
  this.hover = {index: lo};
  this.draw();
  var yfmt = this.opts.tipFormat || this.opts.yFormat || fmt.sig;
  var rows = d.series.map(function (s) { return [s.name, yfmt(s.values[lo])]; });
  if (this.opts.stacked && d.series.length > 1) {
    var tot = 0;
    d.series.forEach(function (s) { tot += +s.values[lo] || 0; });
    rows.push(['total', yfmt(tot)]);
  }
  var extra = this.opts.tipExtra ? this.opts.tipExtra(lo) : [];
  tooltip.show(e.clientX, e.clientY, {title: fmt.time(d.x[lo]), rows: rows.concat(extra)});
};
