/* clrscope dashboard: the Locks tab.
 *
 * Lock contention in the window (/api/v1/locks): totals, the contended locks with where threads
 * waited and which threads held them, a histogram of wait durations, and a flame graph of where
 * threads wait; a row picks the lock the flame graph shows.
 */

import * as F from '../fmt.js';
import * as Charts from '../charts.js';
import {h, clear, panel, unavailable, notAvailableText, stat} from '../dom.js';
import {state, windowText, spanSeconds} from '../state.js';
import {api, qs} from '../requests.js';
import {DataTable} from '../table.js';
import {FlamePanel} from '../flame_panel.js';

export function create() {
  var p = panel('Lock contention', '');
  var stats = h('div', {'class': 'stats'});
  var histP = panel('Wait durations', 'contentions per bucket');
  var bars = new Charts.BarChart(histP.body, {height: 170, yFormat: F.count});
  var listP = panel('Contended locks', '');
  var table = new DataTable({
    columns: [
      {key: 'name', label: 'Lock', cls: 'name'},
      {key: 'site', label: 'Waited in', cls: 'name', value: function (r) { return r.site || ''; }},
      {key: 'owner', label: 'Held by (wait caused)', cls: 'name', nosort: true,
        render: function (r) {
          var o = (r.owners || []).slice(0, 2).map(function (x) {
            return (x.thread || x.tid) + ' (' + F.pct(r.wait_ns ? x.wait_ns / r.wait_ns : 0, 0) + ')';
          });
          return o.length ? o.join(', ') + ((r.owners || []).length > 2 ? ', …' : '') : '–';
        }},
      {key: 'wait_ns', label: 'Total wait', num: true, render: function (r) { return F.ns(r.wait_ns); }},
      {key: 'count', label: 'Contentions', num: true, render: function (r) { return F.int(r.count); }},
      {key: 'mean', label: 'Mean wait', num: true, value: function (r) { return r.count ? r.wait_ns / r.count : 0; },
        render: function (r) { return F.ns(r.count ? r.wait_ns / r.count : 0); }}
    ],
    sortKey: 'wait_ns',
    onClick: function (r) { fp.toggleFilter(r.name, table); },
    isSelected: function (r) { return r.name === state.filter; },
    empty: 'No lock contention in this window.',
    footer: 'click a row to see where threads wait for that lock'
  });
  p.body.appendChild(stats);
  listP.body.appendChild(table.el);
  var fp = new FlamePanel('Where threads wait for locks', [['lock-time', 'wait time'], ['lock-count', 'contentions']]);
  fp.onFilterChange = function () { table.render(); };

  function bucketLabel(le, prev) {
    function ms(v) { return v >= 1000 ? F.sig(v / 1000) + 's' : F.sig(v) + 'ms'; }
    if (le == null || !isFinite(le)) return '>' + ms(prev);
    return '≤' + ms(le);
  }

  function load() {
    return api('api/v1/locks?' + qs({seconds: state.seconds})).then(function (r) {
      if (r.aborted) return;
      clear(stats);
      if (!r.ok) {
        stats.appendChild(unavailable(notAvailableText(r)));
        bars.setData(null);
        table.setRows([]);
        return;
      }
      var d = r.data;
      p.sub('last ' + windowText());
      [stat('total wait', F.ns(d.total_wait_ns)),
        stat('contentions', F.int(d.count)),
        stat('mean wait', d.count ? F.ns(d.total_wait_ns / d.count) : '–'),
        stat('threads blocked (avg)', spanSeconds(d) > 0 ? F.sig(d.total_wait_ns / (spanSeconds(d) * 1e9)) : '–')
      ].forEach(function (e) { stats.appendChild(e); });
      var hist = d.histogram || [];
      var prev = 0;
      var labels = hist.map(function (b) {
        var l = bucketLabel(b.le_ms, prev);
        prev = b.le_ms;
        return l;
      });
      bars.setData({
        labels: labels,
        values: hist.map(function (b) { return b.count; }),
        tips: hist.map(function (b, i) {
          return {title: 'waits ' + labels[i], rows: [['contentions', F.int(b.count)],
            ['share', F.pct(d.count ? b.count / d.count : 0)]]};
        })
      });
      if (d.locks) {
        listP.el.classList.remove('hidden');
        table.setRows(d.locks);
      } else {
        listP.el.classList.add('hidden');
      }
    });
  }

  return {
    el: h('div', null, [p.el, listP.el, histP.el, fp.el]),
    refresh: function () { return Promise.all([load(), fp.refresh()]); },
    applyState: function () { fp.applyState(); }
  };
}
