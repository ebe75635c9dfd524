/* clrscope dashboard: the page's state.
 *
 * The view's state lives in the URL hash (#tab=cpu&seconds=60&q=…&zoom=a;b&icicle=1&native=fold|group&filter=…),
 * so a link reproduces a view: `state` holds it parsed, readHash() fills it from the URL and
 * saveHash() writes it back. `status` is the process's last /api/v1/status reply (null until
 * the first), which says which profiles run.
 */

import {hook} from './hook.js';
import * as F from './fmt.js';
import {TABS} from './tabs.js';

export var SECONDS = [10, 60, 300, 900];
export var state = {
  tab: 'overview', seconds: 60, type: '', q: '', zoom: [], icicle: false, fold: false, group: false,
  filter: '', sel: '', snap: '', a: '', b: '', paused: false
};
var lastHash = null;          // the hash readHash read or saveHash wrote last
var onSaved = function () {};

export var status = null;

export function setStatus(s) {
  status = s;
}

export function profileOn(p) {
  return !status || !Array.isArray(status.profiles) || status.profiles.indexOf(p) >= 0;
}

/* Seconds a window may reach back: the memory's history, or the history on disk's age while it
 * is on (docs/history.md); a post-mortem server's history_s is its whole history. */
export function reach() {
  if (!status) return 900;
  var hi = status.history;
  return hi && hi.enabled ? Math.max(hi.max_age_s, status.history_s) : status.history_s;
}

/* `clrscope serve`: the history of a process that has exited (status.mode) */
export function postMortem() {
  return !!status && status.mode === 'post-mortem';
}

/* Fills `state` from the URL; returns the hash that stands for it. */
export function readHash() {
  var p = new URLSearchParams(location.hash.replace(/^#/, ''));
  var tab = p.get('tab') || 'overview';
  state.tab = TABS.some(function (t) { return t.id === tab; }) ? tab : 'overview';
  var s = parseInt(p.get('seconds'), 10);
  state.seconds = s > 0 && s <= MAX_WINDOW_S ? s : 60;
  state.type = p.get('type') || '';
  state.q = p.get('q') || '';
  state.zoom = p.get('zoom') ? p.get('zoom').split(';') : [];
  state.icicle = p.get('icicle') === '1';
  state.fold = p.get('native') === 'fold';
  state.group = p.get('native') === 'group';
  state.filter = p.get('filter') || '';
  state.sel = p.get('sel') || '';
  state.snap = p.get('snap') || '';
  state.a = p.get('a') || '';
  state.b = p.get('b') || '';
  lastHash = hashFor(state);
  return lastHash;
}

/* The URL's hash is the one this page wrote or read last (a hashchange it caused itself). */
export function hashIsCurrent() {
  return location.hash === lastHash;
}

export function hashFor(st) {
  var p = new URLSearchParams();
  p.set('tab', st.tab);
  p.set('seconds', String(st.seconds));
  if (st.type) p.set('type', st.type);
  if (st.filter) p.set('filter', st.filter);
  if (st.q) p.set('q', st.q);
  if (st.zoom && st.zoom.length) p.set('zoom', st.zoom.join(';'));
  if (st.icicle) p.set('icicle', '1');
  if (st.fold) p.set('native', 'fold');
  else if (st.group) p.set('native', 'group');
  if (st.sel) p.set('sel', st.sel);
  if (st.snap) p.set('snap', st.snap);
  if (st.a) p.set('a', st.a);
  if (st.b) p.set('b', st.b);
  return '#' + p.toString();
}

/* fn runs after each saveHash: app.js passes the header's redraw (its links carry the state).
 * chrome.js imports this module, so this one takes the redraw instead of importing it. */
export function afterSave(fn) {
  onSaved = fn;
}

/* Records the state in the URL without adding a history entry. */
export function saveHash() {
  var s = hashFor(state);
  lastHash = s;
  if (location.hash !== s) history.replaceState(null, '', location.pathname + location.search + s);
  onSaved();
}

/* Goes to another tab (a history entry, so Back works); view-specific state starts fresh. */
export function go(tab, extra) {
  var st = {tab: tab, seconds: state.seconds, type: '', q: '', zoom: [], icicle: state.icicle,
    fold: state.fold, group: state.group, filter: '', sel: '', snap: '', a: '', b: ''};
  Object.keys(extra || {}).forEach(function (k) { st[k] = extra[k]; });
  location.hash = hashFor(st);
}

/* The longest window a URL may ask for (the server says 400 past its reach) */
export var MAX_WINDOW_S = 30 * 86400;

export function windowText(s) {
  if (s == null) s = state.seconds;
  return s < 60 ? s + ' s' : s % 86400 === 0 ? s / 86400 + ' d' : s % 3600 === 0 ? s / 3600 + ' h'
    : s % 60 === 0 ? s / 60 + ' min' : s + ' s';
}

/* A window typed by hand: "90", "90s", "45m", "3h", "2d" (a number, optionally with a unit)
 * into seconds, or a string that says what is wrong. */
export function parseWindow(text, most) {
  var m = /^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?\s*$/i.exec(text || '');
  if (!m) return 'a number of seconds, or with s, m, h or d: 90s, 45m, 3h';
  var k = {s: 1, sec: 1, m: 60, min: 60, h: 3600, d: 86400}[(m[2] || 's').toLowerCase()];
  var s = Math.round(parseFloat(m[1]) * k);
  if (s < 1) return 'at least a second';
  if (s > most) return 'at most ' + windowText(most) + ' (what the history reaches)';
  return s;
}

/* Seconds of data behind a windowed answer, for rates: the span it reports covering (t_from ..
 * t_to, which starts no earlier than the profiler), else the window, but never longer than the
 * process has run. A process up for 10 s must not have its CPU spread over a 60-s window. */
export function spanSeconds(d) {
  if (d && typeof d.t_from === 'number' && typeof d.t_to === 'number' && d.t_to > d.t_from)
    return d.t_to - d.t_from;
  var up = hook.status && hook.status.uptime_s;
  return state.seconds > 0 && up > 0 ? Math.min(state.seconds, up) : state.seconds;
}

/* " (12 s of data)" when the answer covers clearly less than the window asked for */
export function spanNote(span) {
  return state.seconds > 0 && span > 0 && span < state.seconds - 1 ? ' (' + F.duration(span) + ' of data)' : '';
}
