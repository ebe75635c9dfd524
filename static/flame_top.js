/* clrscope dashboard: the flame graph's top-functions table, under the graph.
 *
 * new FlameTop(container, onPick(name)) builds it:
 *   top.setRows(rows, total, unit, emptyText)   rows of flame_model.top ({name, self, total}),
 *       shares of `total`; null or none: one row saying emptyText
 *   top.mark(re, selected)   rows whose name the graph's search matches, and the picked one
 * A header click sorts (the share columns sort like their value column); a row click hands its
 * function to onPick, which highlights it in the graph. At most TOP_ROWS rows are drawn.
 */

import * as F from './fmt.js';
import {el} from './dom.js';

var TOP_ROWS = 300;      // rows shown in the top-functions table

var TOP_COLS = [
  {key: 'name', label: 'Function', cls: 'name'},
  {key: 'self', label: 'Self', num: true},
  {key: 'selfPct', label: 'Self %', num: true},
  {key: 'total', label: 'Total', num: true},
  {key: 'totalPct', label: 'Total %', num: true}
];

export function FlameTop(container, onPick) {
  this.onPick = onPick;
  this.rows = null;
  this.total = 1;
  this.unit = 'count';
  this.emptyText = '';
  this.sortKey = 'self';
  this.sortDir = -1;
  this.re = null;
  this.selected = null;
  this.rowEls = [];
  var box = el('div', 'flame-top');
  box.appendChild(el('h3', null, 'Top functions'));
  var wrap = el('div', 'tablewrap');
  this.table = el('table', 'data');
  wrap.appendChild(this.table);
  box.appendChild(wrap);
  this.foot = el('div', 'tablefoot');
  box.appendChild(this.foot);
  container.appendChild(box);
}

FlameTop.prototype.setRows = function (rows, total, unit, emptyText) {
  this.rows = rows;
  this.total = total;
  this.unit = unit;
  this.emptyText = emptyText;
  this.render();
};

FlameTop.prototype.render = function () {
  var self = this;
  var t = this.table;
  t.textContent = '';
  var thead = el('thead');
  var hr = el('tr');
  TOP_COLS.forEach(function (c) {
    var th = el('th', 'sortable' + (c.num ? ' num' : ''), c.label);
    var key = c.key === 'selfPct' ? 'self' : c.key === 'totalPct' ? 'total' : c.key;
    if (c.key === self.sortKey) { // the share columns sort like their value column
      th.classList.add('sorted');
      th.appendChild(el('span', 'arrow', self.sortDir < 0 ? '▼' : '▲'));
      th.setAttribute('aria-sort', self.sortDir < 0 ? 'descending' : 'ascending');
    }
    th.addEventListener('click', function () {
      if (self.sortKey === key) self.sortDir = -self.sortDir;
      else {
        self.sortKey = key;
        self.sortDir = key === 'name' ? 1 : -1;
      }
      self.render();
    });
    hr.appendChild(th);
  });
  thead.appendChild(hr);
  t.appendChild(thead);
  var tbody = el('tbody');
  t.appendChild(tbody);
  var rows = (this.rows || []).slice();
  this.rowEls = [];
  if (!rows.length) {
    var tr0 = el('tr');
    var td0 = el('td', 'empty', this.emptyText);
    td0.colSpan = TOP_COLS.length;
    tr0.appendChild(td0);
    tbody.appendChild(tr0);
    this.foot.textContent = '';
    return;
  }
  var key = this.sortKey;
  var dir = this.sortDir;
  rows.sort(function (a, b) {
    var x = a[key];
    var y = b[key];
    if (x < y) return -dir;
    if (x > y) return dir;
    return a.name < b.name ? -1 : 1;
  });
  var tot = this.total;
  var unit = this.unit;
  var shown = rows.slice(0, TOP_ROWS);
  shown.forEach(function (r) {
    var tr = el('tr', 'click');
    var tdName = el('td', 'name', r.name);
    tr.appendChild(tdName);
    tr.appendChild(el('td', 'num', F.unit(r.self, unit)));
    var sp = el('td', 'num bar');
    if (r.self / tot >= 0.01) { // thinner bars would read as stray lines
      var fill = el('span', 'fill');
      fill.style.width = Math.min(100, r.self / tot * 100).toFixed(2) + '%';
      sp.appendChild(fill);
    }
    sp.appendChild(el('span', 'txt', F.pct(r.self / tot)));
    tr.appendChild(sp);
    tr.appendChild(el('td', 'num', F.unit(r.total, unit)));
    tr.appendChild(el('td', 'num', F.pct(r.total / tot)));
    tr.title = 'highlight ' + r.name + ' in the graph';
    tr.addEventListener('click', function () { self.onPick(r.name); });
    tr._name = r.name;
    self.rowEls.push(tr);
    tbody.appendChild(tr);
  });
  this.foot.textContent = rows.length > TOP_ROWS
    ? 'Showing the first ' + TOP_ROWS + ' of ' + F.int(rows.length) + ' functions. Total counts each function once per stack.'
    : F.int(rows.length) + ' functions. Total counts each function once per stack (recursion is not double counted).';
  this.mark(this.re, this.selected);
};

FlameTop.prototype.mark = function (re, selected) {
  this.re = re;
  this.selected = selected;
  this.rowEls.forEach(function (tr) {
    tr.classList.toggle('match', !!re && re.test(tr._name));
    tr.classList.toggle('sel', tr._name === selected);
  });
};
