/* clrscope dashboard: requests to the JSON API, and whether the profiled process answers.
 *
 * Every request is same-origin with the token cookie the server set on a `?token=` visit.
 * Failures never throw: api() resolves to {ok, status, data, error}, and a non-2xx reply shows
 * its JSON `error` in the banner. A request that cannot reach the process marks it down: one
 * message, the views keep what they show, and the status is asked less and less often until it
 * answers. A view's requests are aborted when another view opens (not the sticky ones).
 */

import {hook} from './hook.js';
import {setError, clearError} from './banner.js';

var inflight = [];

function endpointOf(url) {
  return '/' + url.split('?')[0].replace(/^\//, '');
}

/* GET (or POST) a JSON endpoint. Resolves to {ok, status, data, error}; never rejects. */
export function api(url, opts) {
  opts = opts || {};
  var key = (opts.method && opts.method !== 'GET' ? opts.method + ' ' : '') + endpointOf(url);
  var ctrl = window.AbortController ? new AbortController() : null;
  var entry = {ctrl: ctrl, sticky: !!opts.sticky};
  inflight.push(entry);
  var init = {
    method: opts.method || 'GET',
    credentials: 'same-origin',
    cache: 'no-store',
    headers: {'Accept': 'application/json'},
    signal: ctrl ? ctrl.signal : undefined
  };
  function done() {
    var i = inflight.indexOf(entry);
    if (i >= 0) inflight.splice(i, 1);
  }
  return fetch(url, init).then(function (r) {
    return r.text().then(function (text) {
      done();
      var data = null;
      try {
        data = text ? JSON.parse(text) : null;
      } catch (e) {
        data = null;
      }
      if (!r.ok) {
        var msg = data && data.error ? String(data.error) : r.status + ' ' + (r.statusText || 'error');
        if (!opts.quiet) setError(key, init.method + ' ' + key + ' → ' + r.status + ': ' + msg);
        return {ok: false, status: r.status, error: msg, data: data};
      }
      if (data === null || typeof data !== 'object') {
        setError(key, init.method + ' ' + key + ': the reply is not JSON');
        return {ok: false, status: r.status, error: 'the reply is not JSON'};
      }
      clearError(key);
      return {ok: true, status: r.status, data: data};
    });
  }).catch(function (e) {
    done();
    if (e && e.name === 'AbortError') return {ok: false, status: 0, aborted: true, error: 'aborted'};
    var msg = 'cannot reach the profiler (' + (e && e.message || e) + ')';
    // The process is gone or unreachable: one message (connectionLost), and the views keep
    // what they show (they ignore an aborted reply) instead of each turning into an error.
    connectionLost();
    return {ok: false, status: 0, aborted: true, unreachable: true, error: msg};
  });
}

/* ---------- the connection to the profiled process ---------- */

var downSince = 0;      // when a request first failed to reach the server (0: it answers)
var retryEvery = 2000;  // status retries back off while it does not answer, up to 30 s

function connectionLost() {
  if (downSince) return;
  downSince = Date.now();
  retryEvery = 2000;
  hook.down = true;
  document.body.classList.add('down');
  setError('connection', 'The profiled process has not answered since ' +
    new Date(downSince).toLocaleTimeString() + ' (it exited, or it cannot be reached): the page ' +
    'keeps the last data it showed and asks again, less and less often.');
}

/* The status answered again: true if it had not (the caller starts the view afresh: the same
 * process again, or a new one at the same address). */
export function connectionBack() {
  if (!downSince) return false;
  downSince = 0;
  hook.down = false;
  document.body.classList.remove('down');
  clearError('connection');
  return true;
}

export function isDown() {
  return downSince > 0;
}

/* How long to wait before asking for the status again while it does not answer. */
export function retryDelay() {
  return retryEvery;
}

/* One more retry went unanswered: wait longer before the next. */
export function backOff() {
  retryEvery = Math.min(30000, retryEvery * 2);
}

export function abortViewRequests() {
  inflight.slice().forEach(function (en) {
    if (!en.sticky && en.ctrl) en.ctrl.abort();
  });
}

export function qs(params) {
  var p = new URLSearchParams();
  Object.keys(params).forEach(function (k) {
    if (params[k] !== '' && params[k] != null) p.set(k, String(params[k]));
  });
  return p.toString();
}
