/* clrscope dashboard: the Heap snapshots tab.
 *
 * Heap snapshots (/api/v1/gcdump): take one (a blocking collection walks the whole heap), follow
 * it while it runs, list its types with their shallow and retained bytes, show the paths from GC
 * roots to a picked type, and compare two snapshots. Polls every 0.7 s while one runs. A finished
 * snapshot's .gcdump file replaces the pprof links in the header.
 */

import * as F from '../fmt.js';
import {h, clear, panel, unavailable, notAvailableText, stat} from '../dom.js';
import {state, saveHash} from '../state.js';
import {tabInfo} from '../tabs.js';
import {api, qs} from '../requests.js';
import {setHeapSnapDone, renderDownloads} from '../chrome.js';
import {DataTable} from '../table.js';

export function create() {
  var listP = panel('Heap snapshots', '');
  var detailP = panel('Snapshot', '');
  var pathsP = panel('Paths from roots', '');
  var diffP = panel('Compare two snapshots', '');
  var takeBtn = h('button', {'class': 'btn primary', type: 'button', text: 'Take heap snapshot'});
  var takeMsg = h('span', {'class': 'note'});
  listP.right.appendChild(takeBtn);
  var listBox = h('div', {'class': 'snaps'});
  listP.body.appendChild(h('div', {'class': 'note', text: 'A snapshot walks the whole managed heap during a blocking ' +
    'collection: the process pauses for a moment, longer for large heaps.'}));
  listP.body.appendChild(takeMsg);
  listP.body.appendChild(listBox);
  var snaps = [];
  var detail = null;
  var typeFilter = '';
  var detailHead = h('div');
  var search = h('input', {'class': 'search', type: 'search', attrs: {placeholder: 'Filter types…', 'aria-label': 'filter types'}});
  var types = new DataTable({
    columns: [
      {key: 'type', label: 'Type', cls: 'name'},
      {key: 'count', label: 'Count', num: true, render: function (r) { return F.int(r.count); }},
      {key: 'bytes', label: 'Shallow bytes', num: true, render: function (r) { return F.bytes(r.bytes); }},
      {key: 'retained', label: 'Retained bytes', num: true, render: function (r) { return r.retained != null ? F.bytes(r.retained) : '–'; },
        title: 'memory freed if every object of this type became unreachable'}
    ],
    sortKey: 'retained',
    filter: function () {
      var f = typeFilter.toLowerCase();
      return f ? function (r) { return String(r.type).toLowerCase().indexOf(f) >= 0; } : null;
    },
    onClick: function (r) {
      state.sel = state.sel === r.type ? '' : r.type;
      saveHash();
      types.render();
      loadPaths();
    },
    isSelected: function (r) { return r.type === state.sel; },
    empty: 'No types.',
    footer: 'click a type for its paths from GC roots'
  });
  var typesBox = h('div', null, [h('div', {'class': 'row'}, search), types.el]);
  detailP.body.appendChild(detailHead);
  detailP.body.appendChild(typesBox);
  var pathsBox = h('div', {'class': 'paths'});
  pathsP.body.appendChild(pathsBox);
  var selA = h('select', {attrs: {'aria-label': 'baseline snapshot'}});
  var selB = h('select', {attrs: {'aria-label': 'later snapshot'}});
  var cmpBtn = h('button', {'class': 'btn', type: 'button', text: 'Compare'});
  var diffTable = new DataTable({
    columns: [
      {key: 'type', label: 'Type', cls: 'name'},
      {key: 'count_delta', label: 'Count Δ', num: true, value: function (r) { return r.count_delta; },
        render: function (r) { return h('span', {'class': r.count_delta > 0 ? 'pos' : r.count_delta < 0 ? 'neg' : '', text: signed(r.count_delta, F.int)}); }},
      {key: 'bytes_delta', label: 'Bytes Δ', num: true,
        render: function (r) { return h('span', {'class': r.bytes_delta > 0 ? 'pos' : r.bytes_delta < 0 ? 'neg' : '', text: signed(r.bytes_delta, F.bytes)}); }},
      {key: 'abs', label: '|Bytes Δ|', num: true, value: function (r) { return Math.abs(r.bytes_delta || 0); },
        render: function (r) { return F.bytes(Math.abs(r.bytes_delta || 0)); }}
    ],
    sortKey: 'abs',
    empty: 'Pick two finished snapshots and press Compare.'
  });
  diffTable.setRows([]);
  var diffMsg = h('div');
  diffP.body.appendChild(h('div', {'class': 'row'}, ['baseline', selA, 'compared with', selB, cmpBtn]));
  diffP.body.appendChild(diffMsg);
  diffP.body.appendChild(diffTable.el);
  pathsP.el.classList.add('hidden');
  diffP.el.classList.add('hidden');

  function signed(v, f) {
    if (v == null) return '–';
    return (v > 0 ? '+' : v < 0 ? '−' : '') + f(Math.abs(v));
  }

  search.addEventListener('input', function () {
    typeFilter = search.value.trim();
    types.render();
  });

  takeBtn.addEventListener('click', function () {
    takeBtn.disabled = true;
    takeMsg.textContent = 'Starting…';
    api('api/v1/gcdump', {method: 'POST', sticky: true}).then(function (r) {
      // a double click must not take two snapshots, however fast the first one is; refused for
      // the rate limit (429), the button waits out the seconds the server said
      var wait = r.ok ? 1500 : r.status === 429 && r.data && r.data.retry_after_s ? r.data.retry_after_s * 1000 : 0;
      setTimeout(function () { takeBtn.disabled = false; }, wait);
      if (!r.ok) {
        takeMsg.textContent = r.status === 409 ? 'A snapshot is already running: ' + r.error : 'Could not start: ' + r.error;
        return;
      }
      takeMsg.textContent = '';
      state.snap = String(r.data.id);
      state.sel = '';
      saveHash();
      detail = {id: state.snap, status: r.data.status || 'running', progress: 0};
      renderDetail();
      loadList().then(loadDetail);
    });
  });

  cmpBtn.addEventListener('click', function () {
    state.a = selA.value;
    state.b = selB.value;
    saveHash();
    loadDiff();
  });

  function statusBadge(s) {
    return h('span', {'class': 'badge ' + (s.status || ''), text: s.status || '?'});
  }

  function renderList() {
    clear(listBox);
    if (!snaps.length) {
      listBox.appendChild(h('div', {'class': 'note', text: 'No snapshots yet.'}));
    }
    snaps.slice().reverse().forEach(function (s) {
      var row = h('div', {'class': 'snap' + (String(s.id) === state.snap ? ' sel' : ''), attrs: {tabindex: '0', role: 'button'},
        on: {click: function () { pick(String(s.id)); }, keydown: function (e) { if (e.key === 'Enter') pick(String(s.id)); }}}, [
        h('strong', {text: '#' + s.id}), statusBadge(s),
        s.status === 'done' ? h('span', {text: F.int(s.objects) + ' objects · ' + F.bytes(s.bytes)}) : null,
        s.status === 'running' && s.progress != null ? h('span', {text: Math.round(s.progress * 100) + '%'}) : null,
        h('span', {'class': 'when', text: s.t ? F.time(s.t) : ''}),
        s.status === 'done' ? h('a', {href: 'api/v1/gcdump/' + encodeURIComponent(s.id) + '/file', text: '⤓ .gcdump',
          attrs: {download: 'clrscope-' + s.id + '.gcdump'}, on: {click: function (e) { e.stopPropagation(); }}}) : null
      ]);
      listBox.appendChild(row);
    });
    listP.sub(snaps.length ? snaps.length + ' taken' : '');
    var done = snaps.filter(function (s) { return s.status === 'done'; });
    [selA, selB].forEach(function (sel, k) {
      var cur = k === 0 ? state.a : state.b;
      clear(sel);
      done.forEach(function (s) {
        var o = h('option', {text: '#' + s.id + (s.t ? ' · ' + F.time(s.t) : '')});
        o.value = String(s.id);
        sel.appendChild(o);
      });
      if (cur && done.some(function (s) { return String(s.id) === cur; })) sel.value = cur;
      else if (done.length) sel.value = String(done[k === 0 ? Math.max(0, done.length - 2) : done.length - 1].id);
    });
    cmpBtn.disabled = done.length < 2;
    diffP.el.classList.toggle('hidden', done.length < 2);
  }

  function pick(id) {
    if (state.snap === id) return;
    state.snap = id;
    state.sel = '';
    saveHash();
    detail = null;
    renderList();
    renderDetail();
    loadDetail();
    loadPaths();
  }

  function renderDetail() {
    setHeapSnapDone(!!(state.snap && detail && detail.status === 'done'));
    renderDownloads(tabInfo('heap'));
    clear(detailHead);
    if (!state.snap) {
      detailP.el.classList.add('hidden');
      return;
    }
    detailP.el.classList.remove('hidden');
    detailP.head.querySelector('h2').textContent = 'Snapshot #' + state.snap;
    if (!detail) {
      detailHead.appendChild(h('div', {'class': 'note', text: 'Loading…'}));
      typesBox.classList.add('hidden');
      return;
    }
    var st = detail.status;
    if (st === 'running') {
      var pr = h('progress', {attrs: {max: '1'}});
      pr.value = detail.progress || 0;
      detailHead.appendChild(h('div', {'class': 'row'}, [statusBadge(detail), pr,
        h('span', {text: detail.progress != null ? Math.round(detail.progress * 100) + '%' : 'working…'})]));
      detailP.sub('walking the heap…');
      typesBox.classList.add('hidden');
    } else if (st === 'failed') {
      detailHead.appendChild(h('div', {'class': 'row'}, statusBadge(detail)));
      detailHead.appendChild(h('div', {'class': 'warnbox', text: 'The snapshot failed: ' + (detail.error || 'no reason given')}));
      detailP.sub('');
      typesBox.classList.add('hidden');
    } else if (st === 'done') {
      detailHead.appendChild(h('div', {'class': 'stats'}, [
        stat('objects', F.int(detail.objects)), stat('bytes', F.bytes(detail.bytes)),
        stat('types', F.int((detail.types || []).length))
      ]));
      detailP.sub(detail.t ? 'taken at ' + F.time(detail.t) : '');
      typesBox.classList.remove('hidden');
      types.setRows(detail.types || []);
    } else {
      detailHead.appendChild(h('div', {'class': 'note', text: 'status: ' + st}));
      typesBox.classList.add('hidden');
    }
  }

  function loadList() {
    return api('api/v1/gcdump').then(function (r) {
      if (r.aborted) return;
      if (!r.ok) {
        clear(listBox).appendChild(unavailable(notAvailableText(r)));
        takeBtn.disabled = r.status === 404;
        diffP.el.classList.add('hidden');
        return;
      }
      // the API lists them newest first; everything here counts on oldest first
      snaps = (r.data.snapshots || []).slice().sort(function (x, y) { return Number(x.id) - Number(y.id); });
      if (!snaps.some(function (x) { return x.status === 'running'; }) && /already running/.test(takeMsg.textContent))
        takeMsg.textContent = ''; // that one has ended
      if (!state.snap && snaps.length) {
        state.snap = String(snaps[snaps.length - 1].id);
        saveHash();
      }
      renderList();
    });
  }

  function loadDetail() {
    if (!state.snap) {
      renderDetail();
      return Promise.resolve();
    }
    var id = state.snap;
    return api('api/v1/gcdump/' + encodeURIComponent(id)).then(function (r) {
      if (r.aborted || id !== state.snap) return;
      if (!r.ok) {
        detail = {id: id, status: 'failed', error: r.error};
      } else {
        var was = detail && detail.status;
        detail = r.data;
        if (was === 'running' && detail.status !== 'running') loadList();
      }
      renderDetail();
    });
  }

  function loadPaths() {
    clear(pathsBox);
    if (!state.snap || !state.sel) {
      pathsP.el.classList.add('hidden');
      return Promise.resolve();
    }
    pathsP.el.classList.remove('hidden');
    pathsP.sub(state.sel);
    pathsBox.appendChild(h('div', {'class': 'note', text: 'Loading…'}));
    var id = state.snap;
    var t = state.sel;
    return api('api/v1/gcdump/' + encodeURIComponent(id) + '/paths?' + qs({type: t})).then(function (r) {
      if (r.aborted || id !== state.snap || t !== state.sel) return;
      clear(pathsBox);
      if (!r.ok) {
        pathsBox.appendChild(unavailable(notAvailableText(r)));
        return;
      }
      var paths = r.data.paths || [];
      if (!paths.length) pathsBox.appendChild(h('div', {'class': 'note', text: 'No path from a root was recorded for this type.'}));
      paths.forEach(function (path) {
        var row = h('div', {'class': 'path'});
        path.forEach(function (step, i) {
          if (i) row.appendChild(h('span', {'class': 'arrow', text: '→'}));
          row.appendChild(h('span', {'class': i === 0 ? 'root' : '', text: step}));
        });
        pathsBox.appendChild(row);
      });
    });
  }

  function loadDiff() {
    if (!state.a || !state.b) return Promise.resolve();
    clear(diffMsg);
    if (state.a === state.b) {
      diffMsg.appendChild(h('div', {'class': 'note', text: 'Pick two different snapshots.'}));
      return Promise.resolve();
    }
    return api('api/v1/gcdump/diff?' + qs({a: state.a, b: state.b})).then(function (r) {
      if (r.aborted) return;
      if (!r.ok) {
        diffMsg.appendChild(unavailable(notAvailableText(r)));
        diffTable.setRows([]);
        return;
      }
      diffP.sub('#' + r.data.a + ' → #' + r.data.b);
      diffTable.setRows(r.data.types || []);
    });
  }

  renderDetail();
  var first = true;
  return {
    el: h('div', null, [listP.el, detailP.el, pathsP.el, diffP.el]),
    refresh: function () {
      var running = detail && detail.status === 'running';
      var jobs = [loadList().then(function () {
        if (first || running || !detail) return loadDetail();
      })];
      if (first) {
        jobs.push(loadPaths());
        jobs.push(loadDiff());
      }
      first = false;
      return Promise.all(jobs);
    },
    // poll quickly while a snapshot runs
    interval: function () { return detail && detail.status === 'running' ? 700 : 5000; }
  };
}
