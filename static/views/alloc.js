/* clrscope dashboard: the Allocations tab.
 *
 * Estimated allocations in the window by type (/api/v1/allocations), with the estimate checked
 * against the runtime's exact allocated total, and a flame graph of the allocation stacks (bytes or
 * count); a row picks the type the flame graph shows.
 */

import * as F from '../fmt.js';
import {h, clear, panel, unavailable, notAvailableText, barCell} from '../dom.js';
import {state, windowText, spanSeconds, spanNote} from '../state.js';
import {api, qs} from '../requests.js';
import {DataTable} from '../table.js';
import {FlamePanel} from '../flame_panel.js';

function intervalCell(r) {
  var ci = r.bytes_ci95;
  if (!Array.isArray(ci) || ci.length !== 2 || !(r.bytes > 0)) return '–';
  return h('span', {title: F.bytes(ci[0]) + ' – ' + F.bytes(ci[1]), text: '±' + F.pct((ci[1] - r.bytes) / r.bytes)});
}

export function create() {
  var p = panel('Allocations by type', '');
  var check = h('div', {'class': 'note'});
  var bias = h('div', {'class': 'note'});
  var fp = new FlamePanel('Allocation stacks', [['alloc-bytes', 'bytes'], ['alloc-count', 'count']]);
  var totalBytes = 0;
  var table = new DataTable({
    columns: [
      {key: 'type', label: 'Type', cls: 'name'},
      {key: 'count', label: 'Est. count', num: true, render: function (r) { return F.int(r.count); }},
      {key: 'bytes', label: 'Est. bytes', num: true, render: function (r) { return F.bytes(r.bytes); }},
      {key: 'ci', label: '95% interval', num: true,
        value: function (r) { return Array.isArray(r.bytes_ci95) && r.bytes > 0 ? (r.bytes_ci95[1] - r.bytes) / r.bytes : Infinity; },
        render: function (r) { return intervalCell(r); },
        title: 'where the type\'s true bytes lie with 95% confidence, from its samples (about ±2/√samples)'},
      {key: 'share', label: 'Share of bytes', num: true, value: function (r) { return totalBytes ? r.bytes / totalBytes : 0; },
        render: function (r) { var s = totalBytes ? r.bytes / totalBytes : 0; return barCell(s, F.pct(s)); }},
      {key: 'samples', label: 'Samples', num: true, render: function (r) { return F.int(r.samples); },
        title: 'allocation events actually sampled'}
    ],
    sortKey: 'bytes',
    onClick: function (r) { selectType(r.type); },
    isSelected: function (r) { return r.type === state.filter; },
    empty: 'No allocations sampled in this window.',
    footer: 'click a type to see the stacks that allocate it'
  });
  p.body.appendChild(check);
  p.body.appendChild(table.el);
  p.body.appendChild(bias);
  fp.onFilterChange = function () { table.render(); };

  function selectType(t) {
    fp.toggleFilter(t, table);
  }

  function load() {
    return api('api/v1/allocations?' + qs({seconds: state.seconds})).then(function (r) {
      if (r.aborted) return;
      if (!r.ok) {
        table.setRows([]);
        clear(check).appendChild(unavailable(notAvailableText(r)));
        return;
      }
      var d = r.data;
      var types = d.types || [];
      var tot = d.total || {};
      totalBytes = tot.bytes || types.reduce(function (s, t) { return s + (t.bytes || 0); }, 0);
      var tspan = spanSeconds(d);
      p.sub((d.method ? d.method + ' · ' : '') + F.bytes(totalBytes) + ' in the last ' + windowText() +
        spanNote(tspan) + (tspan > 0 ? ' (' + F.bytes(totalBytes / tspan) + '/s)' : '') +
        (tot.samples != null ? ' · ' + F.int(tot.samples) + ' samples' : ''));
      clear(check);
      if (typeof d.coverage === 'number' && d.coverage < 0.999) {
        check.appendChild(h('div', {'class': 'coverage', title: d.coverage_note || '',
          text: 'Allocations sampled ' + F.pct(d.coverage) + ' of this window: the overhead budget ' +
            '(CLRSCOPE_OVERHEAD_BUDGET) turned the allocation events down; every sample counts for the ' +
            'time they were off, so the figures stand for the whole window, with wider intervals.'}));
      }
      var ci = tot.ci95;
      var ciText = Array.isArray(ci) && ci.length === 2 ? ' (95% interval ' + F.bytes(ci[0]) + ' – ' + F.bytes(ci[1]) + ')' : '';
      if (d.exact_bytes == null) {
        check.appendChild(h('span', {text: 'Self-check: estimated ' + F.bytes(totalBytes) + ciText +
          '; the exact allocated total is not available' + (d.exact_note ? ': ' + d.exact_note : '.')}));
      } else {
        var sc = d.self_check || {estimated_bytes: totalBytes, exact_bytes: d.exact_bytes};
        var ratio = sc.exact_bytes > 0 ? sc.estimated_bytes / sc.exact_bytes : null;
        var off = ratio != null && Math.abs(1 - ratio) > 0.2;
        var span = sc.t_to != null && sc.t_from != null ? ' over the ' + F.int(sc.t_to - sc.t_from) +
          ' s the runtime counter covers' : '';
        check.appendChild(h('span', {'class': 'selfcheck', text: 'Self-check: estimated ' + F.bytes(sc.estimated_bytes) +
          ' vs. exactly ' + F.bytes(sc.exact_bytes) + ' allocated' + span +
          ' (GC.GetTotalAllocatedBytes, from the runtime\'s alloc-rate counter)' +
          (ratio != null ? ' → the estimate is ' + F.pct(ratio, 1) + ' of the exact total.' : '.') +
          (ciText ? ' Whole window: ' + F.bytes(totalBytes) + ciText + '.' : '')}));
        // with few samples the estimate's own 95% interval is wider than ±20%: no verdict
        var loose = Array.isArray(ci) && ci.length === 2 && totalBytes > 0 && (ci[1] - ci[0]) / 2 / totalBytes > 0.2;
        if (off && loose) check.appendChild(h('span', {'class': 'badge', text: ' too few samples to judge yet '}));
        else if (off) check.appendChild(h('span', {'class': 'badge leak', text: ' off by more than 20% '}));
      }
      var sb = d.stack_budget;
      bias.textContent = (d.bias_note || '') + (sb && sb.thinned > 0 ? ' Stack walks are capped at ' +
        F.int(sb.per_s) + '/s (CLRSCOPE_ALLOC_STACKS_PER_S): ' + F.int(sb.thinned) + ' of ' +
        F.int(sb.thinned + sb.walked) + ' samples since start had no stack walked: this table counts ' +
        'every sample, the flame graphs upscale the walked ones to stand for the rest (unbiased, noisier).' : '');
      table.setRows(types);
    });
  }

  return {
    el: h('div', null, [p.el, fp.el]),
    refresh: function () { return Promise.all([load(), fp.refresh()]); },
    applyState: function () { fp.applyState(); table.render(); }
  };
}
