/* clrscope dashboard: the page's entry (index.html loads it as a module): which view a tab
 * shows, mounting it, and the polling.
 *
 * The header polls /api/v1/status every 2 s and the open tab refreshes every 5 s (every minute
 * for a window that reaches past the memory into the history on disk; a view may ask
 * for another interval), both stopped by "Pause" and while the page is hidden. While the process
 * does not answer, only the status is asked, less and less often. A hash change that keeps the
 * tab hands the view its new state (applyState); another tab mounts a new view.
 *
 * A view is views/<tab id>.js; its create() returns {el, refresh() -> promise, and optionally
 * applyState(), onStatus(status), interval() -> ms}. README.md says how to add one.
 */

import {hook, noteError} from './hook.js';
import * as Charts from './charts.js';
import {$, clear, panel, unavailable} from './dom.js';
import {SECONDS, state, status, setStatus, profileOn, readHash, hashIsCurrent, afterSave, saveHash, reach, windowText, parseWindow} from './state.js';
import {tabInfo} from './tabs.js';
import {setError, clearViewErrors, dismissErrors} from './banner.js';
import {api, connectionBack, isDown, retryDelay, backOff, abortViewRequests, tokenDownloads} from './requests.js';
import {renderChrome, renderStatus, setHeapSnapDone} from './chrome.js';
import * as overview from './views/overview.js';
import * as cpu from './views/cpu.js';
import * as wall from './views/wall.js';
import * as alloc from './views/alloc.js';
import * as live from './views/live.js';
import * as gc from './views/gc.js';
import * as exceptions from './views/exceptions.js';
import * as locks from './views/locks.js';
import * as heap from './views/heap.js';
import * as threads from './views/threads.js';
import * as diff from './views/diff.js';

/* tab id (tabs.js) -> its view's module */
var VIEWS = {
  overview: overview, cpu: cpu, wall: wall, alloc: alloc, live: live, gc: gc, exceptions: exceptions,
  locks: locks, heap: heap, threads: threads, diff: diff
};

var view = null;
var viewTab = null;
var viewBusy = false;
var lastView = 0;
var lastStatus = 0;

function guard(fn) {
  try {
    return fn();
  } catch (e) {
    noteError(e && e.stack || e);
    setError('internal', 'dashboard error: ' + (e && e.message || e));
    return null;
  }
}

function mount() {
  abortViewRequests();
  setHeapSnapDone(false);
  viewBusy = false;
  Charts.tooltip.hide();
  clearViewErrors();
  var main = clear($('main'));
  viewTab = state.tab;
  hook.tab = state.tab;
  var info = tabInfo(state.tab);
  view = info.profile && !profileOn(info.profile) ? offView(info)
    : guard(function () { return VIEWS[state.tab].create(); });
  if (view) main.appendChild(view.el);
  renderChrome();
  refreshView();
}

// The view of a tab whose profile this process runs without (CLRSCOPE_PROFILES): nothing to
// load, nothing to count as zero.
function offView(info) {
  var p = panel(info.label, '');
  p.body.appendChild(unavailable('The ' + info.profile + ' profile is off in this process: ' +
    'CLRSCOPE_PROFILES lists ' + ((status && status.profiles || []).join(', ') || 'no profile') +
    '. Start the app with CLRSCOPE_PROFILES=all (or add ' + info.profile + ') to see it.'));
  return {el: p.el, off: true, refresh: function () {}};
}

var statusBusy = false;

function refreshStatus() {
  if (statusBusy) return;
  statusBusy = true;
  api('api/v1/status', {sticky: true}).then(function (r) {
    statusBusy = false;
    if (r.unreachable) backOff();
    if (r.ok) {
      if (connectionBack()) mount();
      var first = !status;
      setStatus(r.data);
      renderStatus(status);
      if (first) renderChrome();
      var info = tabInfo(viewTab);
      if (view && !view.off && info.profile && !profileOn(info.profile)) mount();
      else if (view && view.onStatus) guard(function () { view.onStatus(status); });
    } else if (!status) {
      $('h-name').textContent = r.status === 401 ? 'unauthorized' : 'status not available';
    }
  });
}

function refreshView() {
  if (!view || viewBusy) return;
  viewBusy = true;
  lastView = Date.now();
  var v = view;
  var p = guard(function () { return v.refresh(); });
  Promise.resolve(p).then(function () {
    if (v === view) viewBusy = false;
    hook.refreshes = (hook.refreshes || 0) + 1;
    if (hook.firstRefreshAt == null) hook.firstRefreshAt = performance.now();
  }, function (e) {
    if (v === view) viewBusy = false;
    noteError(e && e.stack || e);
    setError('internal', 'dashboard error: ' + (e && e.message || e));
  });
}

function onHash() {
  if (hashIsCurrent()) return;
  var prevTab = viewTab;
  readHash();
  if (state.tab !== prevTab || !view || !view.applyState) {
    mount();
    return;
  }
  guard(function () { view.applyState(); });
  renderChrome();
  refreshView();
}

function tick() {
  if (state.paused || document.hidden) return;
  var now = Date.now();
  if (isDown()) { // only the status is asked, until it answers
    if (now - lastStatus >= retryDelay()) {
      lastStatus = now;
      refreshStatus();
    }
    return;
  }
  if (now - lastStatus >= 2000) {
    lastStatus = now;
    refreshStatus();
  }
  var every = view && view.interval ? view.interval() : 5000;
  // a window past the memory is read from the history on disk: a minute changes it by little
  if (status && state.seconds > status.history_s) every = Math.max(every, 60000);
  if (now - lastView >= every) refreshView();
}

/* The page's own query without ?token=: requests.js took the token when it loaded (it keeps it
 * in this tab's sessionStorage), so it need not linger in the address bar, the history or links
 * copied from it. */
function searchWithoutToken() {
  var p = new URLSearchParams(location.search);
  if (!p.has('token')) return location.search;
  p.delete('token');
  var s = p.toString();
  return s ? '?' + s : '';
}

function init() {
  var hash = readHash();
  history.replaceState(null, '', location.pathname + searchWithoutToken() + hash);
  tokenDownloads();
  afterSave(renderChrome);
  window.addEventListener('hashchange', function () { guard(onHash); });
  function setWindow(s) {
    if (s === state.seconds) return;
    state.seconds = s;
    saveHash();
    refreshView();
  }
  Array.prototype.forEach.call($('window').querySelectorAll('button[data-seconds]'), function (b) {
    b.addEventListener('click', function () {
      if (tabInfo(state.tab).nowindow) return;
      setWindow(+b.getAttribute('data-seconds'));
    });
  });
  /* a window of one's own: the button gives way to a field; Enter takes it, Escape or leaving
   * it puts the button back */
  var custom = $('window-custom'), input = $('window-input');
  function closeInput() {
    input.hidden = true;
    input.classList.remove('bad');
    custom.hidden = false;
  }
  custom.addEventListener('click', function () {
    if (tabInfo(state.tab).nowindow) return;
    custom.hidden = true;
    input.hidden = false;
    input.value = custom.classList.contains('on') ? windowText() : '';
    input.focus();
    input.select();
  });
  input.addEventListener('keydown', function (e) {
    if (e.key === 'Escape') {
      closeInput();
      return;
    }
    if (e.key !== 'Enter') return;
    var s = parseWindow(input.value, reach());
    if (typeof s === 'string') {
      input.classList.add('bad');
      input.title = s;
      return;
    }
    closeInput();
    setWindow(s);
    renderChrome();
  });
  input.addEventListener('blur', closeInput);
  $('pause').addEventListener('click', function () {
    state.paused = !state.paused;
    hook.paused = state.paused;
    renderChrome();
    if (!state.paused) {
      lastStatus = Date.now();
      refreshStatus();
      refreshView();
    }
  });
  $('banner-close').addEventListener('click', function () {
    dismissErrors();
  });
  document.addEventListener('keydown', function (e) {
    var tag = e.target && e.target.tagName;
    if (e.key === '/' && tag !== 'INPUT' && tag !== 'SELECT' && tag !== 'TEXTAREA') {
      var s = document.querySelector('main .flame-toolbar .search, main .search');
      if (s) {
        e.preventDefault();
        s.focus();
      }
    }
  });
  hook.seconds = SECONDS;
  lastStatus = Date.now();
  refreshStatus();
  mount();
  setInterval(function () { guard(tick); }, 500);
}

guard(init);
