/* clrscope dashboard: the Live objects tab.
 *
 * The sampled objects still alive (/api/v1/live) by type, with their ages, the collections they
 * survived and the leak suspects; the count of the picked types over time (leak suspects, else the
 * largest); and a flame graph of where the live objects were allocated. Not windowed: the table is
 * what is alive now.
 */

import * as F from '../fmt.js';
import {TimeChart} from '../time_chart.js';
import {marks} from '../marks.js';
import {h, clear, panel, unavailable, notAvailableText, shortType} from '../dom.js';
import {state, saveHash} from '../state.js';
import {api} from '../requests.js';
import {DataTable} from '../table.js';
import {FlamePanel} from '../flame_panel.js';

export function create() {
  var p = panel('Live objects by type', '');
  var note = h('div');
  var hist = panel('Live count over time', '');
  var chart = new TimeChart(hist.body, {height: 170, yFormat: F.count, tipFormat: F.int, legend: true,
    emptyText: 'no history yet'});
  var fp = new FlamePanel('Where live objects were allocated', [['live-bytes', 'bytes'], ['live-count', 'count']],
    {windowed: false});
  var types = [];
  var table = new DataTable({
    columns: [
      {key: 'type', label: 'Type', cls: 'name', render: function (r) {
        return h('span', null, [r.type, r.leak_suspect ? ' ' : null,
          r.leak_suspect ? h('span', {'class': 'badge leak', text: 'leak suspect',
            title: r.leak_evidence || 'count keeps growing and objects keep surviving collections'}) : null]);
      }},
      {key: 'count', label: 'Count', num: true, render: function (r) { return F.int(r.count); }},
      {key: 'bytes', label: 'Bytes', num: true, render: function (r) { return F.bytes(r.bytes); }},
      {key: 'tracked', label: 'Tracked', num: true, title: 'sampled objects followed individually',
        render: function (r) { return r.tracked != null ? F.int(r.tracked) : '–'; }},
      {key: 'p50', label: 'Age p50', num: true, value: function (r) { return r.age_s && r.age_s.p50; },
        render: function (r) { return r.age_s ? F.duration(r.age_s.p50) : '–'; }},
      {key: 'p90', label: 'Age p90', num: true, value: function (r) { return r.age_s && r.age_s.p90; },
        render: function (r) { return r.age_s ? F.duration(r.age_s.p90) : '–'; }},
      {key: 'max', label: 'Age max', num: true, value: function (r) { return r.age_s && r.age_s.max; },
        render: function (r) { return r.age_s ? F.duration(r.age_s.max) : '–'; }},
      {key: 'gcs', label: 'GCs survived', num: true, title: 'median / most',
        value: function (r) { return r.gcs_survived && r.gcs_survived.max; },
        render: function (r) { return r.gcs_survived ? r.gcs_survived.p50 + ' / ' + r.gcs_survived.max : '–'; }},
      {key: 'leak', label: 'Suspect', num: true, value: function (r) { return r.leak_suspect ? 1 : 0; },
        render: function (r) { return r.leak_suspect ? 'yes' : ''; }}
    ],
    sortKey: 'bytes',
    onClick: function (r) { select(r.type); },
    isSelected: function (r) { return r.type === state.sel; },
    empty: 'No live objects tracked yet.',
    footer: 'click a type for its history and the stacks that allocated it'
  });
  p.body.appendChild(note);
  p.body.appendChild(table.el);
  fp.onFilterChange = function () {
    table.render();
    drawHistory();
  };

  function select(t) {
    var on = state.sel !== t;
    state.sel = on ? t : '';
    state.filter = on ? t : '';
    state.zoom = [];
    state.q = '';
    fp.fg.setState({q: '', zoom: [], icicle: state.icicle});
    saveHash();
    fp.syncControls();
    table.render();
    drawHistory();
    fp.refresh();
  }

  function drawHistory() {
    var picked = state.sel ? types.filter(function (t) { return t.type === state.sel; }) : [];
    if (!picked.length) {
      // leak suspects first: their growth is the story; otherwise the largest types
      picked = types.filter(function (t) { return t.leak_suspect; }).slice(0, 5);
      if (picked.length) {
        hist.sub('leak suspects · click a row to pick a type');
      } else {
        picked = types.slice().sort(function (a, b) { return b.bytes - a.bytes; }).slice(0, 5);
        hist.sub(picked.length ? 'the five largest types · click a row to pick one' : '');
      }
    } else {
      hist.sub(shortType(state.sel));
    }
    var xs = {};
    picked.forEach(function (t) { (t.history || []).forEach(function (pt) { xs[pt.t] = 1; }); });
    var x = Object.keys(xs).map(Number).sort(function (a, b) { return a - b; });
    var series = picked.map(function (t) {
      var byT = {};
      (t.history || []).forEach(function (pt) { byT[pt.t] = pt.count; });
      return {name: shortType(t.type), values: x.map(function (tt) { return byT[tt] != null ? byT[tt] : null; })};
    });
    chart.setData({x: x, series: series, marks: markList});
  }

  var markList = [];

  function load() {
    return Promise.all([api('api/v1/live'), marks()]).then(function (got) {
      var r = got[0];
      markList = got[1];
      if (r.aborted) return;
      clear(note);
      if (!r.ok) {
        types = [];
        table.setRows([]);
        note.appendChild(unavailable(notAvailableText(r)));
        drawHistory();
        return;
      }
      var d = r.data;
      types = d.types || [];
      p.sub(F.int(d.tracked) + ' objects tracked' + (d.cap ? ' of a cap of ' + F.int(d.cap) : ''));
      if (d.capped) {
        note.appendChild(h('div', {'class': 'warnbox', text: 'Tracking is at its cap of ' + F.int(d.cap) +
          ' objects, so newly sampled objects are tracked only as tracked ones die: counts and bytes are ' +
          'estimates and the youngest objects are under-represented.'}));
      }
      table.setRows(types);
      drawHistory();
    });
  }

  return {
    el: h('div', null, [p.el, hist.el, fp.el]),
    refresh: function () { return Promise.all([load(), fp.refresh()]); },
    applyState: function () { fp.applyState(); table.render(); drawHistory(); }
  };
}
