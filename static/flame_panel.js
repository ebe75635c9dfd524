/* clrscope dashboard: FlamePanel, a flame graph card bound to the URL state (its measure, the
 * filter a table row picked, the search, zoom and orientation), and flameView, a tab that is one
 * flame graph (CPU, Wall).
 */

import {hook} from './hook.js';
import * as F from './fmt.js';
import {h, clear, panel, notAvailableText, shortType} from './dom.js';
import {state, saveHash, windowText, spanSeconds, spanNote} from './state.js';
import {api, qs} from './requests.js';
import {FlameGraph} from './flame.js';

/*
 * A flame graph card bound to the URL state: types = [[type, label], ...] (several give a
 * toggle), windowed = pass `seconds`. Uses state.type, state.filter, state.q, zoom, icicle.
 */
export function FlamePanel(title, types, opts) {
  var self = this;
  opts = opts || {};
  this.types = types;
  this.windowed = opts.windowed !== false;
  this.p = panel(title, '');
  this.filterBox = h('span');
  this.p.right.appendChild(this.filterBox);
  if (types.length > 1) {
    var seg = h('div', {'class': 'seg', attrs: {role: 'group', 'aria-label': 'measure'}});
    this.typeBtns = types.map(function (t) {
      var b = h('button', {type: 'button', text: t[1], on: {click: function () {
        if (state.type === t[0]) return;
        state.type = t[0];
        state.zoom = [];
        self.fg.setState({q: state.q, zoom: [], icicle: state.icicle});
        saveHash();
        self.syncControls();
        self.refresh();
      }}});
      b._type = t[0];
      seg.appendChild(b);
      return b;
    });
    this.p.right.appendChild(seg);
  }
  if (opts.native !== false) {
    // the runtime's, the JIT's and system libraries' frames folded into the managed code above
    this.foldBtn = h('button', {type: 'button', 'class': 'btn fold', text: 'Fold native',
      title: 'fold native frames (the runtime, its stubs, system libraries) into the managed method that called them',
      on: {click: function () { self.setNative(state.fold ? '' : 'fold'); }}});
    // or kept, under the names of their groups: the runtime, the JIT, its stubs, the system
    this.groupBtn = h('button', {type: 'button', 'class': 'btn fold group', text: 'Group native',
      title: 'name native frames by group: [native runtime], [native JIT], [native GC], [native stubs], [native system]',
      on: {click: function () { self.setNative(state.group ? '' : 'group'); }}});
    this.p.right.appendChild(this.foldBtn);
    this.p.right.appendChild(this.groupBtn);
  }
  this.fg = new FlameGraph(this.p.body, {onChange: function (st) {
    state.q = st.q;
    state.zoom = st.zoom;
    state.icicle = st.icicle;
    saveHash();
  }});
  this.fg.setState({q: state.q, zoom: state.zoom, icicle: state.icicle});
  this.el = this.p.el;
  this.seq = 0;
  this.syncControls();
}

// A table row picked (or picked again): the flame graph shows only its stacks (or all again).
FlamePanel.prototype.toggleFilter = function (value, table) {
  state.filter = state.filter === value ? '' : value;
  state.zoom = [];
  state.q = '';
  this.fg.setState({q: '', zoom: [], icicle: state.icicle});
  saveHash();
  this.syncControls();
  table.render();
  this.refresh();
  if (state.filter) this.el.scrollIntoView({behavior: 'smooth', block: 'start'});
};

FlamePanel.prototype.type = function () {
  var t = state.type;
  for (var i = 0; i < this.types.length; i++) if (this.types[i][0] === t) return t;
  return this.types[0][0];
};

/* native frames: '' as they are, 'fold' or 'group' (one at a time) */
FlamePanel.prototype.setNative = function (mode) {
  state.fold = mode === 'fold';
  state.group = mode === 'group';
  state.zoom = [];
  this.fg.setState({q: state.q, zoom: [], icicle: state.icicle});
  saveHash();
  this.syncControls();
  this.refresh();
};

FlamePanel.prototype.syncControls = function () {
  var self = this;
  var cur = this.type();
  (this.typeBtns || []).forEach(function (b) { b.classList.toggle('on', b._type === cur); });
  if (this.foldBtn) {
    this.foldBtn.classList.toggle('on', !!state.fold);
    this.foldBtn.setAttribute('aria-pressed', state.fold ? 'true' : 'false');
    this.groupBtn.classList.toggle('on', !!state.group);
    this.groupBtn.setAttribute('aria-pressed', state.group ? 'true' : 'false');
  }
  clear(this.filterBox);
  if (state.filter) {
    this.filterBox.appendChild(h('span', {'class': 'filterchip', title: 'only stacks of ' + state.filter}, [
      'filter: ' + shortType(state.filter),
      h('button', {type: 'button', text: '×', title: 'remove the filter', on: {click: function () {
        state.filter = '';
        state.sel = '';
        state.zoom = [];
        self.fg.setState({q: state.q, zoom: [], icicle: state.icicle});
        saveHash();
        self.syncControls();
        self.refresh();
        if (self.onFilterChange) self.onFilterChange();
      }}})
    ]));
  }
};

FlamePanel.prototype.refresh = function () {
  var self = this;
  var seq = ++this.seq; // a newer request (type or filter change) supersedes this one
  var type = this.type();
  var url = 'api/v1/flamegraph?' + qs({type: type, seconds: this.windowed ? state.seconds : '',
    max_nodes: 8192, filter: state.filter,
    native: !this.foldBtn ? '' : state.fold ? 'fold' : state.group ? 'group' : ''});
  return api(url).then(function (r) {
    if (r.aborted || seq !== self.seq) return;
    if (!r.ok) {
      self.fg.clear(notAvailableText(r));
      self.p.sub('');
      return;
    }
    var d = r.data;
    self.fg.setData(d);
    var sub = F.unit(d.total, d.unit) + ' total';
    var span = self.windowed ? spanSeconds(d) : 0;
    if (self.windowed) sub += ' in the last ' + windowText() + spanNote(span);
    if (self.windowed && d.unit === 'nanoseconds' && span > 0 && (type === 'cpu' || type === 'wall')) {
      var per = d.total / (span * 1e9);
      hook.perSecond = {type: type, value: per, span: span};
      sub += ' · ≈ ' + F.sig(per) + (type === 'cpu' ? ' cores busy' : ' threads');
    }
    if (typeof d.coverage === 'number' && d.coverage < 0.999) {
      sub += ' · allocations sampled ' + F.pct(d.coverage) + ' of this window (overhead budget; ' +
        'weighted to stand for all of it)';
    }
    self.p.sub(sub);
  });
};

FlamePanel.prototype.applyState = function () {
  this.fg.setState({q: state.q, zoom: state.zoom, icicle: state.icicle});
  this.syncControls();
};

/* A view that is one flame graph of `type`, with a note above it. */
export function flameView(title, type, note) {
  var fp = new FlamePanel(title, [[type, type]]);
  var wrap = h('div', null, [fp.el]);
  if (note) fp.p.body.insertBefore(h('div', {'class': 'note', text: note}), fp.p.body.firstChild);
  return {el: wrap, refresh: function () { return fp.refresh(); }, applyState: function () { fp.applyState(); }};
}
