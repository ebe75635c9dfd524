/* clrscope dashboard: DOM helpers every view uses, and the small pieces they build pages from
 * (a panel, a stat, a share bar, the "not available" note).
 */

import {shortName} from './flame_model.js';

/* h('div', {class, text, title, href, on: {click: fn}, attrs: {}}, [children]) — never sets
 * a style attribute (the page's CSP forbids them); widths are set through el.style. */
export function h(tag, props, children) {
  var e = document.createElement(tag);
  props = props || {};
  if (props['class']) e.className = props['class'];
  if (props.text != null) e.textContent = props.text;
  if (props.title) e.title = props.title;
  if (props.href) e.href = props.href;
  if (props.type) e.type = props.type;
  if (props.attrs) {
    Object.keys(props.attrs).forEach(function (k) { e.setAttribute(k, props.attrs[k]); });
  }
  if (props.on) {
    Object.keys(props.on).forEach(function (k) { e.addEventListener(k, props.on[k]); });
  }
  if (children != null) {
    (Array.isArray(children) ? children : [children]).forEach(function (c) {
      if (c == null || c === false) return;
      e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    });
  }
  return e;
}

/* el('td', 'num', text): h's short form, which the flame graph's files use */
export function el(tag, cls, text) {
  var e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  return e;
}

export function $(id) {
  return document.getElementById(id);
}

export function clear(e) {
  while (e.firstChild) e.removeChild(e.firstChild);
  return e;
}

/* A card: {el, head, body, sub(text), right} */
export function panel(title, subText) {
  var sub = h('span', {'class': 'sub', text: subText || ''});
  var right = h('div', {'class': 'right'});
  var head = h('div', {'class': 'panel-head'}, [h('h2', {text: title}), sub, right]);
  var body = h('div');
  var el = h('section', {'class': 'panel'}, [head, body]);
  return {
    el: el, head: head, body: body, right: right,
    sub: function (t) { sub.textContent = t || ''; }
  };
}

export function unavailable(msg) {
  return h('div', {'class': 'unavailable', text: msg});
}

export function notAvailableText(res) {
  if (res.status === 404 || res.status === 501) return 'Not available: ' + (res.error || 'this endpoint is not served yet');
  return 'Could not load: ' + (res.error || 'request failed');
}

export function stat(label, value, cls) {
  return h('div', {'class': 'stat'}, [
    h('div', {'class': 'v' + (cls ? ' ' + cls : ''), text: value}),
    h('div', {'class': 'l', text: label})
  ]);
}

/* A share with a light bar behind it (skipped below 1%, where it would read as a stray line). */
export function barCell(share, text) {
  var fill = null;
  if (share >= 0.01) {
    fill = h('span', {'class': 'fill'});
    fill.style.width = Math.min(100, share * 100).toFixed(2) + '%';
  }
  return h('span', {'class': 'bar'}, [fill, h('span', {'class': 'txt', text: text})]);
}

export function shortType(name) {
  return shortName(name || '');
}
