/* clrscope dashboard: the GC tab.
 *
 * Garbage collection in the window (/api/v1/gc): the GC share of CPU over time with each
 * collection marked (height = pause, colour = generation), the heap by generation, and the recent
 * collections; a warning above the GC-share threshold.
 */

import * as F from '../fmt.js';
import * as Charts from '../charts.js';
import {TimeChart} from '../time_chart.js';
import {marks} from '../marks.js';
import {h, clear, panel, unavailable, notAvailableText, stat} from '../dom.js';
import {state, windowText} from '../state.js';
import {api, qs} from '../requests.js';
import {DataTable} from '../table.js';

var GEN_COLORS = function () {
  var s = Charts.theme().series;
  return [s[0], s[1], s[4]];
};

export function create() {
  var warn = h('div');
  var summary = panel('Garbage collection', '');
  var share = panel('GC share of CPU', 'bars on the axis are collections, height = pause');
  var heap = panel('Heap size by generation', '');
  var recent = panel('Recent collections', '');
  var stats = h('div', {'class': 'stats'});
  summary.body.appendChild(stats);
  var shareChart = new TimeChart(share.body, {height: 200, yFormat: function (v) { return F.pct(v, 0); },
    tipFormat: function (v) { return F.pct(v); }, fill: true, yMin: 0.05});
  var heapChart = new TimeChart(heap.body, {height: 200, stacked: true, bytes: true, yFormat: F.bytes});
  var table = new DataTable({
    columns: [
      {key: 'number', label: '#', num: true},
      {key: 't', label: 'Time', num: true, render: function (r) { return F.time(r.t); }},
      {key: 'generation', label: 'Gen', num: true, render: function (r) {
        return h('span', {'class': 'badge gen' + Math.min(2, r.generation | 0), text: 'gen' + r.generation});
      }},
      {key: 'reason', label: 'Reason'},
      {key: 'type', label: 'Type'},
      {key: 'pause_ms', label: 'Pause', num: true, render: function (r) { return r.pause_ms != null ? F.sig(r.pause_ms) + ' ms' : '–'; }},
      {key: 'heap_before', label: 'Heap before', num: true, render: function (r) { return F.bytes(r.heap_before); }},
      {key: 'heap_after', label: 'Heap after', num: true, render: function (r) { return F.bytes(r.heap_after); }},
      {key: 'promoted', label: 'Promoted', num: true, render: function (r) { return F.bytes(r.promoted); }}
    ],
    sortKey: 'number',
    limit: 200,
    empty: 'No collections in this window.'
  });
  recent.body.appendChild(table.el);

  function gcInfo(c) {
    return {
      title: 'GC #' + c.number + ' · gen' + c.generation,
      rows: [
        ['time', F.time(c.t)], ['reason', c.reason || '–'], ['type', c.type || '–'],
        ['pause', c.pause_ms != null ? F.sig(c.pause_ms) + ' ms' : '–'],
        ['heap before', F.bytes(c.heap_before)], ['heap after', F.bytes(c.heap_after)],
        ['promoted', F.bytes(c.promoted)]
      ]
    };
  }

  function load() {
    return Promise.all([api('api/v1/gc?' + qs({seconds: state.seconds})), marks()]).then(function (got) {
      var r = got[0], ms = got[1];
      if (r.aborted) return;
      clear(warn);
      clear(stats);
      if (!r.ok) {
        stats.appendChild(unavailable(notAvailableText(r)));
        shareChart.setData(null);
        heapChart.setData(null);
        table.setRows([]);
        return;
      }
      var d = r.data;
      var series = d.series || [];
      var cols = d.collections || [];
      if (d.warn_threshold != null && (d.warn != null ? d.warn : d.gc_cpu_share >= d.warn_threshold)) {
        warn.appendChild(h('div', {'class': 'warnbox', text: 'The GC used ' + F.pct(d.gc_cpu_share) +
          ' of the process CPU in the last ' + windowText() + ', above the ' + F.pct(d.warn_threshold, 0) +
          ' threshold. Look at the Allocations tab for what allocates the most.'}));
      }
      var gens = [0, 0, 0];
      var maxPause = 0;
      if (d.window) { // every GC of the window, also those beyond the records listed
        gens = [d.window.gen0, d.window.gen1, d.window.gen2];
        maxPause = d.window.max_pause_ms;
      } else {
        cols.forEach(function (c) {
          gens[Math.min(2, c.generation | 0)]++;
          if (c.pause_ms > maxPause) maxPause = c.pause_ms;
        });
      }
      summary.sub((d.mode || '') + (d.concurrent != null ? (d.concurrent ? ', concurrent' : ', not concurrent') : '') +
        ' · last ' + windowText());
      [stat('GC share of CPU', F.pct(d.gc_cpu_share), (d.warn != null ? d.warn : d.gc_cpu_share >= d.warn_threshold) ? 'bad' : ''),
        stat('time paused', F.pct(d.pause_share)),
        stat('collections', F.int(d.collections_in_window != null ? d.collections_in_window : cols.length)),
        stat('gen0 / gen1 / gen2', gens.join(' / ')),
        stat('longest pause', cols.length ? F.sig(maxPause) + ' ms' : '–')
      ].forEach(function (e) { stats.appendChild(e); });
      var now = series.length ? series[series.length - 1].t : Date.now() / 1000;
      cols.forEach(function (c) { if (c.t > now) now = c.t; });
      var xMin = now - state.seconds;
      var colors = GEN_COLORS();
      shareChart.setData({
        x: series.map(function (p) { return p.t; }),
        series: [{name: 'GC share of CPU', values: series.map(function (p) { return p.gc_cpu_share; })}],
        markers: cols.map(function (c) {
          return {x: c.t, v: c.pause_ms || 0, color: colors[Math.min(2, c.generation | 0)], info: gcInfo(c)};
        }),
        refLine: d.warn_threshold, xMin: xMin, xMax: now, marks: ms
      });
      var gensK = ['gen0', 'gen1', 'gen2', 'loh', 'poh'];
      heapChart.setData({
        x: series.map(function (p) { return p.t; }),
        series: gensK.map(function (g) {
          return {name: g, values: series.map(function (p) { return p.heap ? p.heap[g] : null; })};
        }),
        xMin: xMin, xMax: now, marks: ms
      });
      var last = series.length && series[series.length - 1].heap;
      if (last) {
        var sum = gensK.reduce(function (s, g) { return s + (last[g] || 0); }, 0);
        heap.sub('now ' + F.bytes(sum));
      }
      table.setRows(cols);
      recent.sub(d.collections_omitted ? 'the newest ' + F.int(cols.length) + ' of ' +
        F.int(cols.length + d.collections_omitted) + ' in the window' : '');
    });
  }

  return {
    el: h('div', null, [warn, summary.el, h('div', {'class': 'cols2'}, [share.el, heap.el]), recent.el]),
    refresh: load
  };
}
