/* clrscope dashboard: the Overview tab.
 *
 * One panel per question: the top CPU functions, the GC share, the top allocation types, the
 * exceptions and lock contention, clrscope's own cost, the Datadog export, and the runtime
 * counters. A panel whose profile is off says so, not zero; a click on a function or a type opens
 * its tab, filtered.
 */

import * as F from '../fmt.js';
import * as Charts from '../charts.js';
import * as model from '../flame_model.js';
import {h, clear, panel, unavailable, notAvailableText, stat, barCell, shortType} from '../dom.js';
import {state, status, profileOn, postMortem, hashFor, go, windowText, spanSeconds, spanNote} from '../state.js';
import {api, qs} from '../requests.js';

export function create() {
  var cpu = panel('CPU · top functions', 'self time');
  var gc = panel('Garbage collection', '');
  var alloc = panel('Top allocation types', '');
  var activity = panel('Exceptions and locks', '');
  var cost = panel('Profiler self-cost', '');
  var exp = panel('Export', '');
  var counters = panel('Runtime counters', 'System.Runtime, as dotnet-counters shows them, once a second');
  counters.el.classList.add('wide');
  var grid = h('div', {'class': 'grid'}, [cpu.el, gc.el, alloc.el, activity.el, cost.el, exp.el, counters.el]);
  var spark = h('canvas', {'class': 'spark'});

  function top10(rows, total, unit) {
    var t = h('table', {'class': 'data'});
    t.appendChild(h('thead', null, h('tr', null, [h('th', {text: 'Function'}), h('th', {'class': 'num', text: 'Self'}),
      h('th', {'class': 'num', text: 'Share'})])));
    var tb = h('tbody');
    rows.forEach(function (f) {
      tb.appendChild(h('tr', {'class': 'click', title: f.name, on: {click: function () {
        go('cpu', {q: '^' + f.name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$'});
      }}}, [
        h('td', {'class': 'name', text: shortType(f.name)}),
        h('td', {'class': 'num', text: F.unit(f.self, unit)}),
        h('td', {'class': 'num'}, barCell(total ? f.self / total : 0, F.pct(total ? f.self / total : 0)))
      ]));
    });
    if (!rows.length) tb.appendChild(h('tr', null, h('td', {'class': 'empty', text: 'No samples yet.', attrs: {colspan: 3}})));
    t.appendChild(tb);
    return h('div', {'class': 'tablewrap short'}, t);
  }

  function loadCpu() {
    var s = state.seconds;
    return api('api/v1/top?' + qs({type: 'cpu', seconds: s, limit: 10}), {quiet: true}).then(function (r) {
      if (r.aborted) return;
      if (r.ok) {
        clear(cpu.body).appendChild(top10((r.data.functions || []).slice(0, 10), r.data.total, r.data.unit));
        cpu.sub('self time · ' + F.unit(r.data.total, r.data.unit) + ' CPU in ' + windowText());
        return;
      }
      // no /top yet: compute it from the flame graph
      return api('api/v1/flamegraph?' + qs({type: 'cpu', seconds: s, max_nodes: 8192})).then(function (f) {
        if (f.aborted) return;
        if (!f.ok) {
          clear(cpu.body).appendChild(unavailable(notAvailableText(f)));
          return;
        }
        var m = model.flatten(f.data.root || {name: 'all', children: []});
        var rows = model.top(m).sort(function (a, b) { return b.self - a.self; }).slice(0, 10);
        clear(cpu.body).appendChild(top10(rows, f.data.total || m.total, f.data.unit));
        cpu.sub('self time · ' + F.unit(f.data.total, f.data.unit) + ' CPU in ' + windowText());
      });
    });
  }

  function offNote(p, profile) {
    clear(p.body).appendChild(unavailable(postMortem()
      ? 'Not in the history on disk: this is the history of a process that has exited.'
      : 'Off: the ' + profile + ' profile is not in CLRSCOPE_PROFILES.'));
  }

  function loadGc() {
    if (!profileOn('gc')) return offNote(gc, 'gc');
    return api('api/v1/gc?' + qs({seconds: state.seconds})).then(function (r) {
      if (r.aborted) return;
      clear(gc.body);
      if (!r.ok) {
        gc.body.appendChild(unavailable(notAvailableText(r)));
        return;
      }
      var d = r.data;
      var warn = d.warn_threshold != null && (d.warn != null ? d.warn : d.gc_cpu_share >= d.warn_threshold);
      gc.sub(d.mode ? d.mode + (d.concurrent ? ', concurrent' : '') : '');
      gc.body.appendChild(h('div', {'class': 'stats'}, [
        stat('GC share of CPU', F.pct(d.gc_cpu_share), warn ? 'bad' : ''),
        stat('time paused', F.pct(d.pause_share)),
        stat('collections', F.int(d.collections_in_window != null ? d.collections_in_window : (d.collections || []).length))
      ]));
      gc.body.appendChild(spark);
      Charts.sparkline(spark, (d.series || []).map(function (p) { return p.gc_cpu_share; }),
        {ref: d.warn_threshold, color: warn ? Charts.theme().err : null});
      if (warn) {
        gc.body.appendChild(h('div', {'class': 'note', text: 'Above the ' + F.pct(d.warn_threshold, 0) +
          ' warning threshold: see the GC and Allocations tabs.'}));
      }
    });
  }

  function loadAlloc() {
    if (!profileOn('alloc')) return offNote(alloc, 'alloc');
    return api('api/v1/allocations?' + qs({seconds: state.seconds})).then(function (r) {
      if (r.aborted) return;
      clear(alloc.body);
      if (!r.ok) {
        alloc.body.appendChild(unavailable(notAvailableText(r)));
        return;
      }
      var d = r.data;
      var tot = d.total && d.total.bytes || (d.types || []).reduce(function (s, t) { return s + (t.bytes || 0); }, 0);
      var aspan = spanSeconds(d);
      alloc.sub(F.bytes(tot) + ' in ' + windowText() + spanNote(aspan) + (aspan > 0 ? ' · ' + F.bytes(tot / aspan) + '/s' : ''));
      var t = h('table', {'class': 'data'});
      t.appendChild(h('thead', null, h('tr', null, [h('th', {text: 'Type'}), h('th', {'class': 'num', text: 'Bytes'}),
        h('th', {'class': 'num', text: 'Share'})])));
      var tb = h('tbody');
      (d.types || []).slice(0, 8).forEach(function (x) {
        tb.appendChild(h('tr', {'class': 'click', title: x.type, on: {click: function () {
          go('alloc', {filter: x.type});
        }}}, [
          h('td', {'class': 'name', text: x.type}),
          h('td', {'class': 'num', text: F.bytes(x.bytes)}),
          h('td', {'class': 'num'}, barCell(tot ? x.bytes / tot : 0, F.pct(tot ? x.bytes / tot : 0)))
        ]));
      });
      if (!(d.types || []).length) tb.appendChild(h('tr', null, h('td', {'class': 'empty', text: 'No allocations sampled yet.', attrs: {colspan: 3}})));
      t.appendChild(tb);
      alloc.body.appendChild(h('div', {'class': 'tablewrap short'}, t));
    });
  }

  function loadActivity() {
    var s = state.seconds;
    return Promise.all([
      api('api/v1/exceptions?' + qs({seconds: s})),
      api('api/v1/locks?' + qs({seconds: s}))
    ]).then(function (rs) {
      if (rs[0].aborted || rs[1].aborted) return;
      clear(activity.body);
      activity.sub('last ' + windowText());
      var stats = [];
      var top = null;
      if (!profileOn('exceptions')) {
        stats.push(stat('exceptions', 'off'));
      } else if (rs[0].ok) {
        stats.push(stat('exceptions thrown', F.int(rs[0].data.total)));
        // by type (its messages summed), not one row per message
        top = (rs[0].data.by_type || rs[0].data.types || []).slice().sort(function (a, b) { return b.count - a.count; })[0];
      } else {
        stats.push(stat('exceptions', 'n/a'));
      }
      if (!profileOn('lock')) {
        stats.push(stat('locks', 'off'));
      } else if (rs[1].ok) {
        stats.push(stat('lock wait', F.ns(rs[1].data.total_wait_ns)));
        stats.push(stat('contentions', F.int(rs[1].data.count)));
      } else {
        stats.push(stat('locks', 'n/a'));
      }
      activity.body.appendChild(h('div', {'class': 'stats'}, stats));
      if (top) {
        activity.body.appendChild(h('div', {'class': 'note'}, ['most frequent: ',
          h('a', {'class': 'mono', href: hashFor({tab: 'exceptions', seconds: state.seconds, filter: top.type}),
            text: top.type, title: top.message || ''}), ' (' + F.int(top.count) + ')']));
      }
    });
  }

  function counterText(c) {
    var v = c.value;
    if (c.kind === 'rate' && c.interval_s > 0) v = v / c.interval_s;
    var u = c.units || '';
    /* the runtime's MB are 10^6 bytes; shown in the KiB/MiB every other panel uses */
    if (u === 'MB') { v = v * 1e6; u = 'B'; }
    var txt = u === 'B' ? F.bytes(v) : F.sig(v) + (u ? ' ' + u : '');
    return c.kind === 'rate' ? txt + '/s' : txt;
  }

  /* A series' points as the sparkline draws them, and a tooltip of their range. */
  function seriesText(c, pts) {
    var vals = pts.map(function (p) { return p[1]; });
    var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
    function one(v) {
      var u = c.units || '';
      if (u === 'MB') { v = v * 1e6; u = 'B'; }
      var txt = u === 'B' ? F.bytes(v) : F.sig(v) + (u ? ' ' + u : '');
      return c.kind === 'rate' ? txt + '/s' : txt;
    }
    return 'over ' + windowText() + ': ' + one(lo) + ' to ' + one(hi);
  }

  function loadCounters() {
    var pm = postMortem();
    return api('api/v1/counters?' + qs({seconds: state.seconds, points: 120}), {quiet: true}).then(function (r) {
      if (r.aborted) return;
      clear(counters.body);
      if (r.ok && pm) {
        counters.sub('System.Runtime, the values the process last recorded, and over ' + windowText());
      } else if (!r.ok || !r.data.enabled) {
        var st = r.ok && r.data.stopped;
        counters.body.appendChild(unavailable(!r.ok ? notAvailableText(r)
          : st ? 'Stopped at ' + Math.round(st.gc_rate) + ' GCs/s (limit ' + st.max_gc_rate + '): ' + st.reason + '.'
          : 'Off (CLRSCOPE_RUNTIME_COUNTERS=0).'));
        return;
      }
      var list = r.data.counters || [];
      if (!list.length) {
        counters.body.appendChild(unavailable(pm ? 'The history holds no runtime counters.'
          : r.data.note ? r.data.note + '.' : 'Waiting for the runtime (once a second).'));
        return;
      }
      var series = {};
      (r.data.series || []).forEach(function (sr) { series[sr.name] = sr.points || []; });
      var sparks = [];
      counters.body.appendChild(h('div', {'class': 'counters'}, list.map(function (c) {
        var pts = series[c.name] || [];
        var canvas = h('canvas', {'class': 'cspark'});
        if (pts.length > 1) sparks.push([canvas, pts]);
        return h('div', {'class': 'cell', title: c.name + (c.kind === 'rate' ? ': increase per second over the last interval' : ': latest value') +
            (pts.length > 1 ? '; ' + seriesText(c, pts) : '')}, [
          h('span', {'class': 'n', text: c.name}),
          canvas,
          h('span', {'class': 'v', text: counterText(c)})
        ]);
      })));
      /* drawn once they are laid out; each scaled to its own range */
      sparks.forEach(function (sp) {
        var vals = sp[1].map(function (p) { return p[1]; });
        var lo = Math.min.apply(null, vals);
        Charts.sparkline(sp[0], vals.map(function (v) { return v - lo; }), {height: 18});
      });
    });
  }

  function memTitle(me) {
    var m = me.mem || {};
    return 'held by clrscope, by module: ' + Object.keys(m).map(function (k) {
      return k.replace(/_/g, ' ') + ' ' + F.bytes(m[k]);
    }).join(', ');
  }

  /* The overhead governor (docs/overhead-budget.md): the cost against the budget, what it turned
   * down, and the last two minutes (drawn from /api/v1/budget's history, fetched on refresh). */
  var budgetSpark = h('canvas', {'class': 'spark'});
  var budgetHistory = [];

  function loadBudget() {
    // the governor ran in the process: its history is not on disk (asked once the status says
    // which server this is)
    if (!status || postMortem()) return null;
    return api('api/v1/budget', {quiet: true}).then(function (r) {
      if (r.aborted || !r.ok) return;
      budgetHistory = r.data.history || [];
      renderCost(status);
    });
  }

  function renderBudget(b) {
    if (!b) return;
    if (!b.enabled) {
      cost.body.appendChild(h('div', {'class': 'tablefoot', text: 'No overhead budget (CLRSCOPE_OVERHEAD_BUDGET=0).'}));
      return;
    }
    var over = b.allowed > 0 && b.measured > b.allowed;
    var al = (b.sources && b.sources.alloc) || {};
    cost.body.appendChild(h('div', {'class': 'stats', title: 'what clrscope cost over the last ' + b.window_s +
      ' s: its threads ' + F.pct(b.by_source.threads) + ', its callbacks ' + F.pct(b.by_source.callbacks) +
      ', the runtime\'s work for its allocation events ' + F.pct(b.by_source.runtime_events)}, [
      stat('cost / budget', F.pct(b.measured) + ' / ' + F.pct(b.allowed), over ? 'bad' : 'good'),
      stat('allocations on', al.switchable ? F.pct(al.on_fraction) + ' of each s' : 'always', al.on_fraction < 1 ? 'bad' : '')
    ]));
    if (budgetHistory.length > 1) {
      cost.body.appendChild(budgetSpark);
      Charts.sparkline(budgetSpark, budgetHistory.map(function (p) { return p.measured; }), {ref: b.allowed});
    }
    var why = b.over ? b.over : b.last_change ? 'allocations ' + F.pct(b.last_change.from) + ' → ' +
      F.pct(b.last_change.to) + ' ' + F.ago(b.last_change.t) : '';
    if (why) cost.body.appendChild(h('div', {'class': 'tablefoot', text: 'budget: ' + why}));
  }

  function renderCost(s) {
    clear(cost.body);
    clear(exp.body);
    if (!s) return;
    var me = s.self || {};
    cost.body.appendChild(h('div', {'class': 'stats'}, [
      stat('CPU share', F.pct(me.cpu_share), me.cpu_share > 0.05 ? 'bad' : 'good'),
      stat('CPU time', me.cpu_s != null ? F.sig(me.cpu_s) + ' s' : '–'),
      h('div', {'class': 'stat', title: memTitle(me)}, [h('div', {'class': 'v', text: F.bytes(me.mem_bytes)}),
        h('div', {'class': 'l', text: 'clrscope memory'})]),
      stat('process RSS', F.bytes(me.rss_bytes))
    ]));
    renderBudget(s.budget);
    cost.body.appendChild(h('dl', {'class': 'kvlist'}, [
      h('dt', {text: 'sampling rate'}), h('dd', {text: s.sampling_hz ? s.sampling_hz + ' Hz' : '–'}),
      h('dt', {text: 'dropped samples'}), h('dd', {text: F.int(s.dropped && s.dropped.samples || 0)}),
      h('dt', {text: 'clrscope'}), h('dd', {text: s.clrscope_version || '–'})
    ]));
    var e = s.export;
    if (!e) {
      exp.body.appendChild(unavailable('Not reported by this build.'));
      return;
    }
    exp.sub(e.enabled ? 'Datadog agent upload on' : 'off (set DD_PROFILING_ENABLED=1)');
    var okStatus = e.last_status != null && +e.last_status >= 200 && +e.last_status < 300;
    exp.body.appendChild(h('div', {'class': 'stats'}, [
      stat('status', e.enabled ? (e.last_status == null ? 'waiting' : okStatus ? 'healthy' : 'failing') : 'disabled',
        e.enabled ? (e.last_status == null || okStatus ? 'good' : 'bad') : ''),
      stat('failures', F.int(e.failures || 0), e.failures ? 'bad' : ''),
      stat('sent', F.bytes(e.bytes_sent || 0))
    ]));
    exp.body.appendChild(h('dl', {'class': 'kvlist'}, [
      h('dt', {text: 'last upload'}), h('dd', {text: e.last_upload ? F.ago(e.last_upload) + ' (' + F.time(e.last_upload) + ')' : 'never'}),
      h('dt', {text: 'last HTTP status'}), h('dd', {text: e.last_status != null ? String(e.last_status) : '–'}),
      h('dt', {text: 'dropped profiles'}), h('dd', {text: F.int(e.dropped || 0)})
    ]));
  }

  return {
    el: grid,
    refresh: function () {
      renderCost(status);
      return Promise.all([loadCpu(), loadGc(), loadAlloc(), loadActivity(), loadCounters(), loadBudget()]);
    },
    onStatus: renderCost
  };
}
