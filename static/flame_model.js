/* clrscope dashboard: the flame graph's model, pure functions with no DOM (the unit tests in
 * tests/browser/flame_model.test.mjs import this file in Node).
 *
 * flatten(reply.root) turns the API's nested tree into pre-order typed arrays (level, name, parent,
 * end, left, width, self, per-level index lists); top, compile, match, findPath, pathOf, layout and
 * hitTest work on that model; parts and shortName split and shorten frame names.
 */

export var MIN_PX = 0.5;        // boxes narrower than this are merged into grey runs

function byName(a, b) {
  var x = a.name || '';
  var y = b.name || '';
  return x < y ? -1 : x > y ? 1 : 0;
}

/* Flattens the nested tree into pre-order typed arrays. Children are ordered by name so the
 * layout stays put between refreshes. Iterative: stacks can be hundreds of frames deep. */
export function flatten(root) {
  var n = 0;
  var stack = [root];
  var i, c, kids;
  while (stack.length) {
    var x = stack.pop();
    n++;
    kids = x.children;
    if (kids) for (i = 0; i < kids.length; i++) stack.push(kids[i]);
  }
  var m = {
    n: n,
    level: new Int32Array(n),
    name: new Int32Array(n),
    parent: new Int32Array(n),
    end: new Int32Array(n),
    left: new Float64Array(n),
    width: new Float64Array(n),
    self: new Float64Array(n),
    names: [],
    levels: [],
    maxLevel: 0
  };
  // a differential tree (views/diff.js): each node also holds its value in the two windows
  var diff = typeof root.a === 'number';
  if (diff) {
    m.a = new Float64Array(n);
    m.b = new Float64Array(n);
  }
  // an estimated profile (allocations, exceptions, locks): the samples behind each value
  if (typeof root.samples === 'number') m.samples = new Float64Array(n);
  var ids = new Map();
  // explicit DFS stack, preallocated: it never holds more than n entries
  var sNode = new Array(n);
  var sPar = new Int32Array(n);
  var sLv = new Int32Array(n);
  var sX = new Float64Array(n);
  var sp = 0;
  var idx = 0;
  var maxLevel = 0;
  var rootValue = +root.value || 0;
  if (!rootValue && root.children) {
    for (i = 0; i < root.children.length; i++) rootValue += +root.children[i].value || 0;
  }
  sNode[sp] = root;
  sPar[sp] = -1;
  sLv[sp] = 0;
  sX[sp++] = 0;
  while (sp > 0) {
    sp--;
    var node = sNode[sp];
    sNode[sp] = null;
    var lv = sLv[sp];
    var left = sX[sp];
    var nm = node.name == null ? '?' : String(node.name);
    var id = ids.get(nm);
    if (id === undefined) {
      id = m.names.length;
      ids.set(nm, id);
      m.names.push(nm);
    }
    var value = idx === 0 ? rootValue : +node.value || 0;
    m.level[idx] = lv;
    m.name[idx] = id;
    m.parent[idx] = sPar[sp];
    m.left[idx] = left;
    m.width[idx] = value;
    if (diff) {
      m.a[idx] = +node.a || 0;
      m.b[idx] = +node.b || 0;
    }
    if (m.samples) m.samples[idx] = +node.samples || 0;
    if (lv > maxLevel) maxLevel = lv;
    kids = node.children;
    var childSum = 0;
    if (kids && kids.length) {
      for (c = 1; c < kids.length; c++) { // sort only when the server did not
        if (byName(kids[c - 1], kids[c]) > 0) {
          kids = kids.slice().sort(byName);
          break;
        }
      }
      for (c = 0; c < kids.length; c++) childSum += +kids[c].value || 0;
      // push in reverse so the first child comes off the stack first
      var pos = left + childSum;
      for (c = kids.length - 1; c >= 0; c--) {
        pos -= +kids[c].value || 0;
        sNode[sp] = kids[c];
        sPar[sp] = idx;
        sLv[sp] = lv + 1;
        sX[sp++] = pos;
      }
    }
    m.self[idx] = typeof node.self === 'number' && idx !== 0 ? node.self : Math.max(0, value - childSum);
    idx++;
  }
  // subtree extents: end[i] = i + size(i)
  var size = new Int32Array(n).fill(1);
  for (i = n - 1; i > 0; i--) size[m.parent[i]] += size[i];
  for (i = 0; i < n; i++) m.end[i] = i + size[i];
  // per-level index lists, in pre-order (so also in increasing `left`)
  var counts = new Int32Array(maxLevel + 1);
  for (i = 0; i < n; i++) counts[m.level[i]]++;
  for (i = 0; i <= maxLevel; i++) m.levels.push(new Int32Array(counts[i]));
  var fill = new Int32Array(maxLevel + 1);
  for (i = 0; i < n; i++) {
    var l = m.level[i];
    m.levels[l][fill[l]++] = i;
  }
  m.maxLevel = maxLevel;
  m.total = m.width[0];
  return m;
}

/* Top functions: self summed over every frame of a name; total counts a name once per stack,
 * so recursion does not double count. Skips the synthetic root. */
export function top(m) {
  var k = m.names.length;
  var selfs = new Float64Array(k);
  var totals = new Float64Array(k);
  var onStack = new Int32Array(k);
  var seen = new Uint8Array(k);
  var anc = [];
  for (var i = 1; i < m.n; i++) {
    while (anc.length && m.end[anc[anc.length - 1]] <= i) onStack[m.name[anc.pop()]]--;
    var id = m.name[i];
    seen[id] = 1;
    selfs[id] += m.self[i];
    if (!onStack[id]) totals[id] += m.width[i];
    onStack[id]++;
    anc.push(i);
  }
  var out = [];
  for (var j = 0; j < k; j++) {
    if (seen[j]) out.push({name: m.names[j], self: selfs[j], total: totals[j]});
  }
  return out;
}

/* Compiles a search string: a case-insensitive regex, or the literal text if it is not one. */
export function compile(q) {
  if (!q) return null;
  try {
    return new RegExp(q, 'i');
  } catch (e) {
    return new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i');
  }
}

/* Marks matching names and sums the value of matching frames, skipping frames under a
 * matching ancestor so nothing is counted twice. `within` limits the sum to a subtree. */
export function match(m, re, within) {
  var hit = new Uint8Array(m.names.length);
  for (var j = 0; j < m.names.length; j++) hit[j] = re.test(m.names[j]) ? 1 : 0;
  function sum(from, to) {
    var s = 0;
    var i = from;
    while (i < to) {
      if (hit[m.name[i]]) {
        s += m.width[i];
        i = m.end[i];
      } else {
        i++;
      }
    }
    return s;
  }
  var z = within || 0;
  // frames above the zoomed one are not part of the view
  return {hit: hit, value: sum(0, m.n), inView: sum(z, m.end[z])};
}

/* The frame reached by following `path` (names below the root); the deepest match if the path
 * no longer exists in full. */
export function findPath(m, path) {
  var i = 0;
  for (var p = 0; p < (path || []).length; p++) {
    var found = -1;
    for (var j = i + 1; j < m.end[i]; j = m.end[j]) {
      if (m.names[m.name[j]] === path[p]) {
        found = j;
        break;
      }
    }
    if (found < 0) break;
    i = found;
  }
  return i;
}

export function pathOf(m, i) {
  var out = [];
  for (; i > 0; i = m.parent[i]) out.push(m.names[m.name[i]]);
  return out.reverse();
}

/* Walks what is visible when zoomed on frame z at `px` CSS pixels wide, for levels up to
 * maxLevel. emit(kind, i, level, x, w): kind 0 = a frame, 1 = a merged run of frames narrower
 * than MIN_PX (i = -1), 2 = an ancestor of z (drawn full width). Returns the number emitted. */
export function layout(m, z, px, maxLevel, emit) {
  var drawn = 0;
  var x0 = m.left[z];
  var scale = px / (m.width[z] || 1);
  for (var a = m.parent[z]; a >= 0; a = m.parent[a]) {
    if (m.level[a] <= maxLevel) {
      emit(2, a, m.level[a], 0, px);
      drawn++;
    }
  }
  var zEnd = m.end[z];
  for (var lv = m.level[z]; lv <= maxLevel && lv < m.levels.length; lv++) {
    var arr = m.levels[lv];
    var lo = 0;
    var hi = arr.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (arr[mid] < z) lo = mid + 1;
      else hi = mid;
    }
    var runStart = -1;
    var runEnd = -1;
    for (var k = lo; k < arr.length; k++) {
      var i = arr[k];
      if (i >= zEnd) break;
      var x = (m.left[i] - x0) * scale;
      var w = m.width[i] * scale;
      if (w < MIN_PX) {
        if (runStart >= 0 && x <= runEnd + MIN_PX) {
          if (x + w > runEnd) runEnd = x + w;
        } else {
          if (runStart >= 0 && runEnd - runStart >= MIN_PX) {
            emit(1, -1, lv, runStart, runEnd - runStart);
            drawn++;
          }
          runStart = x;
          runEnd = x + w;
        }
        continue;
      }
      if (runStart >= 0 && runEnd - runStart >= MIN_PX) {
        emit(1, -1, lv, runStart, runEnd - runStart);
        drawn++;
      }
      runStart = -1;
      emit(0, i, lv, x, w);
      drawn++;
    }
    if (runStart >= 0 && runEnd - runStart >= MIN_PX) {
      emit(1, -1, lv, runStart, runEnd - runStart);
      drawn++;
    }
  }
  return drawn;
}

/* The frame under value-space position xv at level lv, or -1. */
export function hitTest(m, z, lv, xv, minValue) {
  if (lv < 0 || lv >= m.levels.length) return -1;
  if (lv < m.level[z]) {
    for (var a = m.parent[z]; a >= 0; a = m.parent[a]) if (m.level[a] === lv) return a;
    return -1;
  }
  var arr = m.levels[lv];
  var lo = 0;
  var hi = arr.length;
  while (lo < hi) { // first index >= z
    var mid = (lo + hi) >> 1;
    if (arr[mid] < z) lo = mid + 1;
    else hi = mid;
  }
  var a0 = lo;
  hi = arr.length;
  var zEnd = m.end[z];
  while (lo < hi) { // first index >= end of zoomed subtree
    var mid2 = (lo + hi) >> 1;
    if (arr[mid2] < zEnd) lo = mid2 + 1;
    else hi = mid2;
  }
  var a1 = lo;
  lo = a0;
  hi = a1;
  while (lo < hi) { // last frame with left <= xv
    var mid3 = (lo + hi) >> 1;
    if (m.left[arr[mid3]] <= xv) lo = mid3 + 1;
    else hi = mid3;
  }
  if (lo === a0) return -1;
  var i = arr[lo - 1];
  if (xv >= m.left[i] + m.width[i]) return -1;
  if (m.width[i] < minValue) return -1;
  return i;
}

/* Splits a frame name on dots outside generic brackets: "A.B<C.D>.M" -> ["A", "B<C.D>", "M"]. */
export function parts(name) {
  var out = [];
  var depth = 0;
  var start = 0;
  for (var i = 0; i < name.length; i++) {
    var ch = name.charCodeAt(i);
    if (ch === 60 || ch === 91 || ch === 40) depth++;        // < [ (
    else if (ch === 62 || ch === 93 || ch === 41) depth--;   // > ] )
    else if (ch === 46 && depth === 0 && i > start) {        // .
      out.push(name.slice(start, i));
      start = i + 1;
    }
  }
  out.push(name.slice(start));
  return out;
}

export function shortName(name) {
  // "[JIT] compiling Ns.Type.Method" keeps its tag; "[native libc.so.6!malloc]" is its function
  if (name.lastIndexOf('[JIT] compiling ', 0) === 0) return '[JIT] ' + shortName(name.slice(16));
  var bang = name.lastIndexOf('[native ', 0) === 0 ? name.indexOf('!') : -1;
  if (bang > 0 && name.charCodeAt(name.length - 1) === 93) return name.slice(bang + 1, -1);
  var p = parts(name);
  return p.length <= 2 ? name : p.slice(-2).join('.');
}

/* A differential tree's node: how its share of its window's total changed, as a step from -4
 * (it shrank to nothing) to 4 (it is new), 0 within 5 % of its larger share. a, b: its values in
 * the base window and the one compared; ta, tb: the windows' totals. */
export function diffStep(a, b, ta, tb) {
  var sa = ta > 0 ? a / ta : 0;
  var sb = tb > 0 ? b / tb : 0;
  var big = Math.max(sa, sb);
  if (!(big > 0)) return 0;
  var r = (sb - sa) / big; // -1..1
  var mag = Math.abs(r);
  var step = mag < 0.05 ? 0 : mag < 0.25 ? 1 : mag < 0.5 ? 2 : mag < 0.9 ? 3 : 4;
  return r < 0 ? -step : step;
}

/* The differential tree drawn as a flame graph: each node's width is its share of window a plus
 * its share of window b (normalized: windows of different lengths or loads weigh the same) or its
 * value in a plus in b (absolute), in units of `scale`; a and b keep the windows' values. */
export function diffTree(root, ta, tb, normalized, scale) {
  var wa = normalized ? (ta > 0 ? scale / ta : 0) : 1;
  var wb = normalized ? (tb > 0 ? scale / tb : 0) : 1;
  var out = {name: root.name, a: +root.base || 0, b: +root.value || 0, children: []};
  var stack = [[root, out]];
  while (stack.length) {
    var top = stack.pop();
    var src = top[0], dst = top[1];
    dst.value = dst.a * wa + dst.b * wb;
    dst.self = (+src.base_self || 0) * wa + (+src.self || 0) * wb;
    var kids = src.children || [];
    for (var i = 0; i < kids.length; i++) {
      var k = {name: kids[i].name, a: +kids[i].base || 0, b: +kids[i].value || 0, children: []};
      dst.children.push(k);
      stack.push([kids[i], k]);
    }
  }
  return out;
}
