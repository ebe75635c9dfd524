/* clrscope dashboard: the error banner under the header.
 *
 * One message per key (an endpoint, "connection", "internal"), at most four shown; a message the
 * user dismissed stays hidden until it changes. A request that succeeds clears its endpoint's.
 */

import {h, $, clear} from './dom.js';

var errors = new Map();      // endpoint -> message shown in the banner
var dismissed = new Set();

function showErrors() {
  var box = $('banner');
  var msgs = $('banner-msgs');
  clear(msgs);
  var shown = 0;
  errors.forEach(function (msg, key) {
    if (dismissed.has(key + msg) || shown >= 4) return;
    msgs.appendChild(h('div', {text: msg}));
    shown++;
  });
  box.classList.toggle('hidden', shown === 0);
}

export function setError(key, msg) {
  if (errors.get(key) === msg) return;
  errors.set(key, msg);
  showErrors();
}

export function clearError(key) {
  if (errors.delete(key)) showErrors();
}

/* A new view: errors from the previous view's endpoints no longer apply. */
export function clearViewErrors() {
  Array.from(errors.keys()).forEach(function (k) { if (k !== '/api/v1/status') errors.delete(k); });
  showErrors();
}

/* The banner's close button: hides what it shows now. */
export function dismissErrors() {
  errors.forEach(function (msg, key) { dismissed.add(key + msg); });
  showErrors();
}
