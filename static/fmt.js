/* clrscope dashboard: how numbers, durations and times are written, everywhere on the page.
 *
 * unit(v, u) picks by the API's unit ("nanoseconds", "bytes", else a count); ns, bytes (KiB, MiB:
 * powers of 1024), count (k, M, G), int (thousands separated), sig (3 significant figures), pct (of
 * a share 0..1), duration (seconds), time (unix seconds as local HH:MM:SS) and ago. Missing or
 * non-finite values read "–" (ago: "never"). No DOM: plain functions.
 */

function trim(x, digits) {
  // 3 significant figures, no trailing zeros: 1.50 -> "1.5", 12.0 -> "12"
  var s = x.toFixed(digits);
  if (s.indexOf('.') >= 0) s = s.replace(/0+$/, '').replace(/\.$/, '');
  return s;
}

export function sig(x) {
  var a = Math.abs(x);
  return trim(x, a >= 100 ? 0 : a >= 10 ? 1 : 2);
}

export function ns(v) {
  if (v == null || !isFinite(v)) return '–';
  var a = Math.abs(v);
  if (a < 1e3) return Math.round(v) + ' ns';
  if (a < 1e6) return sig(v / 1e3) + ' µs';
  if (a < 1e9) return sig(v / 1e6) + ' ms';
  if (a < 120e9) return sig(v / 1e9) + ' s';
  return duration(v / 1e9);
}

export function bytes(v) {
  if (v == null || !isFinite(v)) return '–';
  var a = Math.abs(v);
  var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  var i = 0;
  while (a >= 1024 && i < units.length - 1) {
    a /= 1024;
    v /= 1024;
    i++;
  }
  return (i === 0 ? String(Math.round(v)) : sig(v)) + ' ' + units[i];
}

export function count(v) {
  if (v == null || !isFinite(v)) return '–';
  var a = Math.abs(v);
  if (a < 1e4) return String(Math.round(v));
  if (a < 1e6) return sig(v / 1e3) + 'k';
  if (a < 1e9) return sig(v / 1e6) + 'M';
  return sig(v / 1e9) + 'G';
}

export function int(v) {
  if (v == null || !isFinite(v)) return '–';
  return Math.round(v).toLocaleString('en-US');
}

export function pct(share, digits) {
  if (share == null || !isFinite(share)) return '–';
  var p = share * 100;
  if (digits == null) digits = Math.abs(p) >= 10 ? 1 : 2;
  return p.toFixed(digits) + '%';
}

export function duration(s) {
  if (s == null || !isFinite(s)) return '–';
  if (s > 0 && s < 1) return '<1s';
  s = Math.max(0, Math.floor(s));
  var d = Math.floor(s / 86400);
  var h = Math.floor(s % 86400 / 3600);
  var m = Math.floor(s % 3600 / 60);
  var sec = s % 60;
  function p2(n) { return n < 10 ? '0' + n : String(n); }
  if (d) return d + 'd ' + h + 'h ' + p2(m) + 'm';
  if (h) return h + 'h ' + p2(m) + 'm ' + p2(sec) + 's';
  if (m) return m + 'm ' + p2(sec) + 's';
  return sec + 's';
}

export function time(t) {
  // unix seconds -> local HH:MM:SS
  if (t == null || !isFinite(t)) return '–';
  var d = new Date(t * 1000);
  function p2(n) { return n < 10 ? '0' + n : String(n); }
  return p2(d.getHours()) + ':' + p2(d.getMinutes()) + ':' + p2(d.getSeconds());
}

export function ago(t) {
  if (t == null || !isFinite(t)) return 'never';
  var s = Date.now() / 1000 - t;
  if (s < 0) s = 0;
  return duration(s) + ' ago';
}

export function unit(v, u) {
  if (u === 'nanoseconds') return ns(v);
  if (u === 'bytes') return bytes(v);
  return count(v);
}
