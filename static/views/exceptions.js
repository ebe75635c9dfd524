/* clrscope dashboard: the Exceptions tab.
 *
 * Exceptions thrown in the window by type and message (/api/v1/exceptions), and a flame graph of
 * where they are thrown; a row picks the type the flame graph shows.
 */

import * as F from '../fmt.js';
import {h, clear, panel, unavailable, notAvailableText} from '../dom.js';
import {state, windowText} from '../state.js';
import {api, qs} from '../requests.js';
import {DataTable} from '../table.js';
import {FlamePanel} from '../flame_panel.js';

export function create() {
  var p = panel('Exceptions by type and message', '');
  var msg = h('div');
  var fp = new FlamePanel('Where exceptions are thrown', [['exceptions', 'count']]);
  var table = new DataTable({
    columns: [
      {key: 'type', label: 'Type', cls: 'name'},
      {key: 'message', label: 'Message', cls: 'msg'},
      {key: 'count', label: 'Count', num: true, render: function (r) { return F.int(r.count); },
        title: 'every throw, as the runtime counts them: an exception an await (or throw;) throws again counts each time'},
      {key: 'rethrown', label: 'Of which rethrown', num: true, render: function (r) { return r.rethrown ? F.int(r.rethrown) : '–'; },
        title: 'the same exception object thrown again: each await of a faulted task rethrows it in the awaiting method'},
      {key: 'samples', label: 'Samples', num: true, render: function (r) { return r.samples != null ? F.int(r.samples) : '–'; }}
    ],
    sortKey: 'count',
    onClick: function (r) { fp.toggleFilter(r.type, table); },
    isSelected: function (r) { return r.type === state.filter; },
    empty: 'No exceptions thrown in this window.',
    footer: 'click a row to see where that type is thrown'
  });
  p.body.appendChild(msg);
  p.body.appendChild(table.el);
  fp.onFilterChange = function () { table.render(); };

  function load() {
    return api('api/v1/exceptions?' + qs({seconds: state.seconds})).then(function (r) {
      if (r.aborted) return;
      clear(msg);
      if (!r.ok) {
        table.setRows([]);
        msg.appendChild(unavailable(notAvailableText(r)));
        return;
      }
      var types = r.data.types || [];
      var kinds = {};
      types.forEach(function (t) { kinds[t.type] = 1; });
      var again = r.data.rethrown || 0;
      p.sub(F.int(r.data.total) + ' thrown in the last ' + windowText() +
        (again ? ' (' + F.int(again) + ' of them rethrown: ' + F.int(r.data.total - again) + ' distinct exceptions)' : '') +
        ' · ' + Object.keys(kinds).length + (Object.keys(kinds).length === 1 ? ' type' : ' types'));
      table.setRows(types);
    });
  }

  return {
    el: h('div', null, [p.el, fp.el]),
    refresh: function () { return Promise.all([load(), fp.refresh()]); },
    applyState: function () { fp.applyState(); table.render(); }
  };
}
