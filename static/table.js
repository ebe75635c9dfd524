/* clrscope dashboard: DataTable, the sortable table of the views (allocation types, live
 * objects, collections, exceptions, locks, heap snapshot types).
 */

import * as F from './fmt.js';
import {h, clear} from './dom.js';

/*
 * new DataTable({columns: [{key, label, num, cls, value(row), render(row) -> node|string,
 *   nosort}], sortKey, sortDir, onClick(row), isSelected(row), filter() -> fn|null, limit, empty})
 * Sorting is by click on a header and survives setRows().
 */
export function DataTable(opts) {
  this.opts = opts;
  this.sortKey = opts.sortKey || null;
  this.sortDir = opts.sortDir || -1;
  this.rows = null;
  this.table = h('table', {'class': 'data'});
  this.foot = h('div', {'class': 'tablefoot'});
  this.el = h('div', null, [h('div', {'class': 'tablewrap' + (opts.short ? ' short' : '')}, this.table), this.foot]);
  this.render();
}

DataTable.prototype.setRows = function (rows) {
  this.rows = rows || [];
  this.render();
};

DataTable.prototype._value = function (col, r) {
  return col.value ? col.value(r) : r[col.key];
};

DataTable.prototype.render = function () {
  var self = this;
  var o = this.opts;
  clear(this.table);
  var hr = h('tr');
  o.columns.forEach(function (c) {
    var th = h('th', {'class': (c.num ? 'num' : '') + (c.nosort ? '' : ' sortable'), text: c.label, title: c.title || ''});
    if (!c.nosort) {
      if (c.key === self.sortKey) {
        th.classList.add('sorted');
        th.appendChild(h('span', {'class': 'arrow', text: self.sortDir < 0 ? '▼' : '▲'}));
        th.setAttribute('aria-sort', self.sortDir < 0 ? 'descending' : 'ascending');
      }
      th.addEventListener('click', function () {
        if (self.sortKey === c.key) self.sortDir = -self.sortDir;
        else {
          self.sortKey = c.key;
          self.sortDir = c.num ? -1 : 1;
        }
        self.render();
      });
    }
    hr.appendChild(th);
  });
  this.table.appendChild(h('thead', null, hr));
  var tbody = h('tbody');
  this.table.appendChild(tbody);
  if (this.rows === null) {
    tbody.appendChild(h('tr', null, h('td', {'class': 'empty', text: 'Loading…', attrs: {colspan: o.columns.length}})));
    this.foot.textContent = '';
    return;
  }
  var rows = this.rows;
  var pred = o.filter ? o.filter() : null;
  if (pred) rows = rows.filter(pred);
  var col = null;
  o.columns.forEach(function (c) { if (c.key === self.sortKey) col = c; });
  if (col) {
    var dir = this.sortDir;
    rows = rows.slice().sort(function (a, b) {
      var x = self._value(col, a);
      var y = self._value(col, b);
      if (x == null) x = -Infinity;
      if (y == null) y = -Infinity;
      if (typeof x === 'string' && typeof y === 'string') return x.localeCompare(y) * dir;
      return x < y ? -dir : x > y ? dir : 0;
    });
  }
  var limit = o.limit || 500;
  if (!rows.length) {
    tbody.appendChild(h('tr', null, h('td', {'class': 'empty', text: o.empty || 'Nothing in this window.',
      attrs: {colspan: o.columns.length}})));
  }
  rows.slice(0, limit).forEach(function (r) {
    var tr = h('tr', {'class': o.onClick ? 'click' : ''});
    if (o.isSelected && o.isSelected(r)) tr.classList.add('sel');
    o.columns.forEach(function (c) {
      var v = c.render ? c.render(r) : self._value(c, r);
      var td = h('td', {'class': (c.num ? 'num ' : '') + (c.cls || '')});
      if (v != null && typeof v === 'object') td.appendChild(v);
      else td.textContent = v == null ? '–' : String(v);
      tr.appendChild(td);
    });
    if (o.onClick) tr.addEventListener('click', function () { o.onClick(r); });
    tbody.appendChild(tr);
  });
  var total = this.rows.length;
  var parts = [];
  if (rows.length > limit) parts.push('showing ' + limit + ' of ' + F.int(rows.length));
  else if (pred) parts.push(F.int(rows.length) + ' of ' + F.int(total) + ' match');
  if (o.footer) parts.push(o.footer);
  this.foot.textContent = parts.join(' · ');
};
