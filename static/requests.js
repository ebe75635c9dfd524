/* clrscope dashboard: requests to the JSON API, and whether the profiled process answers.
 *
 * Every request is same-origin. With CLRSCOPE_TOKEN set, the page is opened as `/?token=T`: the
 * token is taken from the address once (app.js then drops it from the address bar), kept in
 * this tab's sessionStorage (its origin's alone, port included, so a reload keeps it and no
 * other server on the host sees it; never in a cookie, which every port of the host would get)
 * and sent as `Authorization: Bearer` with every request; a download link is then fetched the
 * same way and saved from memory. Failures never throw: api() resolves to {ok, status, data,
 * error}, and a non-2xx reply shows its JSON `error` in the banner. A request that cannot reach
 * the process marks it down: one message, the views keep what they show, and the status is
 * asked less and less often until it answers. A view's requests are aborted when another view
 * opens (not the sticky ones).
 */

import {hook} from './hook.js';
import {setError, clearError} from './banner.js';

var inflight = [];
var TOKEN_KEY = 'clrscope_token';
var token = readToken();

function readToken() {
  var t = new URLSearchParams(location.search).get('token') || '';
  try {
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    else t = sessionStorage.getItem(TOKEN_KEY) || '';
  } catch (e) {
    // storage refused: the token lives as long as the page
  }
  return t;
}

function withToken(headers) {
  if (token) headers.Authorization = 'Bearer ' + token;
  return headers;
}

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
    headers: withToken({'Accept': 'application/json'}),
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
        if (!opts.quiet) setError(key, init.method + ' ' + endpointOf(url) + ' → ' + r.status + ': ' + msg);
        return {ok: false, status: r.status, error: msg, data: data};
      }
      if (data === null || typeof data !== 'object') {
        setError(key, init.method + ' ' + endpointOf(url) + ': the reply is not JSON');
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

/* With a token, a click on a download link of this origin fetches the file with the token and
 * saves it from memory (a plain link would go without the header and get 401). Without one the
 * browser follows the link itself. Listens in the capture phase: views may stop a click's
 * propagation. */
export function tokenDownloads() {
  document.addEventListener('click', function (e) {
    if (!token || e.defaultPrevented || e.button !== 0) return;
    var a = e.target && e.target.closest ? e.target.closest('a[download]') : null;
    if (!a) return;
    var u = new URL(a.getAttribute('href'), location.href);
    if (u.protocol === 'blob:' || u.origin !== location.origin) return;
    e.preventDefault();
    var name = a.getAttribute('download') || '';
    var key = 'download ' + u.pathname;
    fetch(u.toString(), {credentials: 'same-origin', cache: 'no-store', headers: withToken({})})
      .then(function (r) {
        if (!r.ok) {
          return r.text().then(function (text) {
            var msg = r.status + ' ' + (r.statusText || 'error');
            try { msg = JSON.parse(text).error || msg; } catch (err) { /* not JSON */ }
            setError(key, 'GET ' + u.pathname + ' → ' + r.status + ': ' + msg);
          });
        }
        return r.blob().then(function (blob) {
          clearError(key);
          var url = URL.createObjectURL(blob);
          var save = document.createElement('a');
          save.href = url;
          save.download = name;
          document.body.appendChild(save);
          save.click();
          save.remove();
          setTimeout(function () { URL.revokeObjectURL(url); }, 60000);
        });
      })
      .catch(function (err) {
        setError(key, 'GET ' + u.pathname + ': ' + (err && err.message || err));
      });
  }, true);
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
