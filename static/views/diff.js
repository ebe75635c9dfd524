/* clrscope dashboard: the Compare tab.
 *
 * A differential flame graph of one profile over two windows (/api/v1/flamegraph/diff): each
 * frame's width is its share of "before" plus its share of "after", its colour how that share
 * changed (red grew, blue shrank); the table lists the functions whose self share changed most.
 * The windows come from presets: the last N minutes against the N before, or the time since a
 * mark (/api/v1/marks) against as long before it. "Mark now" names the present moment.
 */

import {hook} from '../hook.js';
import * as F from '../fmt.js';
import {h, clear, panel, notAvailableText, shortType} from '../dom.js';
import {api, qs} from '../requests.js';
import {FlameGraph} from '../flame.js';
import {DataTable} from '../table.js';
import {diffTree} from '../flame_model.js';
import {marks as getMarks} from '../marks.js';
import {state, saveHash} from '../state.js';

var TYPES = [['cpu', 'CPU'], ['wall', 'Wall'], ['alloc-bytes', 'Alloc bytes'],
  ['alloc-count', 'Alloc count'], ['exceptions', 'Exceptions'], ['lock-time', 'Lock time']];
// [value, text, seconds of history it reaches back]: those past the history kept (the memory's,
// or the disk's while history on disk is on: docs/history.md) are not offered
var PRESETS = [['60', 'last 1 min vs the 1 before', 120], ['300', 'last 5 min vs the 5 before', 600],
  ['900', 'last 15 min vs the 15 before', 1800], ['3600', 'last 1 h vs the 1 before', 7200],
  ['ago:3600', 'last 5 min vs the same 5 min an hour ago', 3900],
  ['ago:86100', 'last 5 min vs the same 5 min yesterday', 86400]];

// kept while the page is open: the tab remounts on every visit
var opts = {type: 'cpu', preset: '300', normalized: true};

function select(options, value, onChange, label) {
  var s = h('select', {attrs: {'aria-label': label}});
  options.forEach(function (o) {
    var op = h('option', {text: o[1]});
    op.value = o[0];
    if (o[0] === value) op.selected = true;
    s.appendChild(op);
  });
  s.addEventListener('change', function () { onChange(s.value); });
  return s;
}

// The windows of a preset: [a, b] as "FROM,TO" (relative seconds, or a mark's unix time).
function windows(preset, marks) {
  var m = /^mark:(\d+)$/.exec(preset);
  if (m) {
    var mk = marks.filter(function (x) { return String(x.id) === m[1]; })[0];
    if (mk) {
      var len = Math.max(1, Math.min(900, Date.now() / 1000 - mk.t));
      return {a: (mk.t - len).toFixed(3) + ',' + mk.t.toFixed(3), b: mk.t.toFixed(3) + ',now',
        text: 'since “' + (mk.label || 'mark ' + mk.id) + '” vs as long before it'};
    }
    preset = '300';
  }
  var ago = /^ago:(\d+)$/.exec(preset);
  if (ago) {
    var back = +ago[1];
    return {a: -(back + 300) + ',' + -back, b: '-300,now', text: PRESETS.filter(function (x) {
      return x[0] === preset; })[0][1]};
  }
  var n = +preset;
  return {a: -2 * n + ',' + -n, b: -n + ',now', text: n >= 3600 ? 'last ' + n / 3600 + ' h vs the ' + n / 3600 + ' h before'
    : 'last ' + n / 60 + ' min vs the ' + n / 60 + ' min before'};
}

export function create() {
  var marks = [];
  var reach = 0; // seconds of history a window may reach back: /api/v1/status
  var seq = 0;
  var p = panel('Compare two windows', '');
  var typeSel = select(TYPES, opts.type, function (v) { opts.type = v; view.refresh(); }, 'profile');
  var presetBox = h('span');
  var normBtn = h('button', {type: 'button', 'class': 'btn', on: {click: function () {
    opts.normalized = !opts.normalized;
    syncNorm();
    view.refresh();
  }}});
  function syncNorm() {
    normBtn.textContent = opts.normalized ? 'Shares' : 'Absolute';
    normBtn.title = opts.normalized ? 'each window weighed by its own total (click: absolute values)'
      : 'absolute values (click: each window weighed by its own total)';
  }
  syncNorm();
  // the flame tabs' Fold native, shared through the URL
  var foldBtn = h('button', {type: 'button', 'class': 'btn fold', text: 'Fold native',
    title: 'fold native frames (the runtime, its stubs, system libraries) into the managed method that called them',
    on: {click: function () {
      state.fold = !state.fold;
      state.group = false;
      saveHash();
      syncFold();
      view.refresh();
    }}});
  function syncFold() {
    foldBtn.classList.toggle('on', !!state.fold);
    foldBtn.setAttribute('aria-pressed', state.fold ? 'true' : 'false');
  }
  syncFold();
  var label = h('input', {attrs: {type: 'text', placeholder: 'label', 'aria-label': 'mark label', maxlength: '120'}});
  var markBtn = h('button', {type: 'button', 'class': 'btn', text: 'Mark now', on: {click: function () {
    markBtn.disabled = true;
    api('api/v1/marks?' + qs({label: label.value || 'mark'}), {method: 'POST', sticky: true}).then(function (r) {
      markBtn.disabled = false;
      if (r.ok) {
        label.value = '';
        opts.preset = 'mark:' + r.data.id;
        view.refresh();
      }
    });
  }}});
  p.right.appendChild(typeSel);
  p.right.appendChild(presetBox);
  p.right.appendChild(normBtn);
  p.right.appendChild(foldBtn);
  p.right.appendChild(label);
  p.right.appendChild(markBtn);
  var note = h('div', {'class': 'note', text: 'Width: a frame’s share of “before” plus its share of ' +
    '“after”. Red: its share grew; blue: it shrank; grey: about the same. Hover for both windows’ values.'});
  p.body.appendChild(note);
  var fg = new FlameGraph(p.body, {});
  fg.root.classList.add('diff');
  var tp = panel('Biggest changes', 'functions by the change of their self share');
  var table = new DataTable({
    columns: [
      {key: 'name', label: 'Function', render: function (r) { return h('span', {'class': 'mono', text: shortType(r.name), title: r.name}); }},
      {key: 'before', label: 'Before', num: true, value: function (r) { return r.before; }, render: function (r) { return F.pct(r.before); }},
      {key: 'after', label: 'After', num: true, value: function (r) { return r.after; }, render: function (r) { return F.pct(r.after); }},
      {key: 'delta', label: 'Change', num: true, value: function (r) { return r.delta; },
        render: function (r) { return h('span', {'class': r.delta > 0 ? 'grew' : r.delta < 0 ? 'shrank' : '', text: (r.delta > 0 ? '+' : r.delta < 0 ? '−' : '') + F.pct(Math.abs(r.delta))}); }}
    ],
    sortKey: null,
    onClick: function (r) { fg.selectFunction(r.name); },
    empty: 'No function in either window.'
  });
  tp.el.classList.add('diff-changes');
  tp.body.appendChild(table.el);

  function renderPresets() {
    clear(presetBox);
    var opt = PRESETS.filter(function (x) { return x[2] <= Math.max(reach, 1800) || x[0] === opts.preset; });
    marks.slice().reverse().forEach(function (m) {
      opt.push(['mark:' + m.id, 'since “' + (m.label || 'mark ' + m.id) + '” (' + F.time(m.t) + ')']);
    });
    presetBox.appendChild(select(opt, opts.preset, function (v) { opts.preset = v; view.refresh(); }, 'windows'));
  }

  var view = {
    el: h('div', null, [p.el, tp.el]),
    interval: function () { return 10000; },
    refresh: function () {
      var my = ++seq;
      var st = reach ? Promise.resolve(null) : api('api/v1/status', {quiet: true});
      return Promise.all([getMarks(true), st]).then(function (got) {
        if (my !== seq) return;
        var list = got[0];
        if (got[1] && got[1].ok) {
          var hi = got[1].data.history;
          reach = hi && hi.enabled ? Math.max(hi.max_age_s, got[1].data.history_s) : got[1].data.history_s;
        }
        marks = list;
        renderPresets();
        var w = windows(opts.preset, marks);
        return api('api/v1/flamegraph/diff?' + qs({type: opts.type, a: w.a, b: w.b, limit: 30,
          native: state.fold ? 'fold' : ''})).then(function (r) {
          if (r.aborted || my !== seq) return;
          if (!r.ok) {
            fg.clear(notAvailableText(r));
            table.setRows([]);
            p.sub('');
            return;
          }
          var d = r.data;
          var ta = d.a.total, tb = d.b.total;
          var root = diffTree(d.root, ta, tb, opts.normalized, 1e9);
          fg.setData({type: d.type, unit: d.unit, root: root, total: root.value,
            diff: {ta: ta, tb: tb, labelA: 'before', labelB: 'after'}});
          p.sub(w.text + ' · before ' + F.unit(ta, d.unit) + ' in ' + F.duration(d.a.t_to - d.a.t_from) +
            ', after ' + F.unit(tb, d.unit) + ' in ' + F.duration(d.b.t_to - d.b.t_from));
          table.setRows(d.functions.map(function (f) {
            var before = ta > 0 ? f.base_self / ta : 0, after = tb > 0 ? f.self / tb : 0;
            return {name: f.name, before: before, after: after, delta: after - before};
          }));
          hook.diff = {type: d.type, a: d.a, b: d.b, top: d.functions.length ? d.functions[0].name : '',
            nodes: d.nodes};
        });
      });
    }
  };
  return view;
}
