// Unit tests of the flame graph's pure model functions (static/flame_model.js), run without a browser:
//   cd tests/browser && node --test flame_model.test.mjs
import {test} from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {fileURLToPath} from 'node:url';

// static/ has no package.json saying its .js files are ES modules, and only a Node that detects
// module syntax (20.19, 22.7 and later) would import the file as one: as a data: URL it is a
// module on every Node. The model imports nothing, so it needs no base URL.
const HERE = path.dirname(fileURLToPath(import.meta.url));
const src = fs.readFileSync(path.join(HERE, '..', '..', 'static', 'flame_model.js'), 'utf8');
const M = await import('data:text/javascript;charset=utf-8,' + encodeURIComponent(src));

// "a;b;c 5" lines -> nested tree with inclusive values, like the API's root
function tree(lines) {
  const root = {name: 'all', value: 0, children: []};
  for (const line of lines) {
    const [stack, v] = line.split(' ');
    const w = Number(v);
    root.value += w;
    let node = root;
    for (const name of stack.split(';')) {
      let ch = node.children.find((c) => c.name === name);
      if (!ch) node.children.push(ch = {name, value: 0, children: []});
      ch.value += w;
      node = ch;
    }
  }
  return root;
}

test('flatten lays frames out in pre-order, children by name, self derived', () => {
  const m = M.flatten(tree(['main;b 3', 'main;a 2', 'main 1', 'other 4']));
  assert.equal(m.n, 5);
  const names = Array.from(m.name, (id) => m.names[id]);
  assert.deepEqual(names, ['all', 'main', 'a', 'b', 'other']);
  assert.deepEqual(Array.from(m.level), [0, 1, 2, 2, 1]);
  assert.deepEqual(Array.from(m.left), [0, 0, 0, 2, 6]);
  assert.deepEqual(Array.from(m.width), [10, 6, 2, 3, 4]);
  assert.deepEqual(Array.from(m.self), [0, 1, 2, 3, 4]);
  assert.deepEqual(Array.from(m.end), [5, 4, 3, 4, 5]);
  assert.equal(m.total, 10);
  assert.equal(m.maxLevel, 2);
  assert.deepEqual(Array.from(m.levels[2]), [2, 3]);
});

test('flatten takes the root value from its children when it is missing', () => {
  const m = M.flatten({name: 'all', children: [{name: 'x', value: 7, self: 7}]});
  assert.equal(m.total, 7);
});

test('flatten survives very deep stacks (no recursion)', () => {
  const root = {name: 'all', value: 1, children: []};
  let node = root;
  for (let i = 0; i < 20000; i++) {
    const ch = {name: 'f' + (i % 7), value: 1, children: []};
    node.children.push(ch);
    node = ch;
  }
  const m = M.flatten(root);
  assert.equal(m.n, 20001);
  assert.equal(m.maxLevel, 20000);
});

test('top counts recursion once per stack in total, every frame in self', () => {
  const m = M.flatten(tree(['a;b;a;b 4', 'a 1', 'c;a 2']));
  const rows = Object.fromEntries(M.top(m).map((r) => [r.name, r]));
  assert.equal(rows.a.total, 7);   // 4 + 1 + 2, the inner a of a;b;a;b not again
  assert.equal(rows.a.self, 3);    // the "a 1" leaf and the "c;a 2" leaf
  assert.equal(rows.b.total, 4);
  assert.equal(rows.b.self, 4);
  assert.equal(rows.c.total, 2);
  assert.equal(rows.all, undefined, 'the synthetic root is not a function');
});

test('match sums matching frames without double counting nested matches', () => {
  const m = M.flatten(tree(['x;Foo;y;Foo 4', 'x;z 6', 'Foo 5']));
  const r = M.match(m, M.compile('foo'));
  assert.equal(r.value, 9);
  const x = M.findPath(m, ['x']);
  assert.equal(M.match(m, M.compile('foo'), x).inView, 4);
  assert.equal(M.compile('a(b').test('xa(bx'), true, 'an invalid regex searches literally');
  assert.equal(M.compile(''), null);
});

test('findPath and pathOf round-trip; a vanished path keeps the deepest prefix', () => {
  const m = M.flatten(tree(['a;b;c 1', 'a;d 1']));
  const c = M.findPath(m, ['a', 'b', 'c']);
  assert.deepEqual(M.pathOf(m, c), ['a', 'b', 'c']);
  const stale = M.findPath(m, ['a', 'b', 'gone']);
  assert.deepEqual(M.pathOf(m, stale), ['a', 'b']);
  assert.equal(M.findPath(m, []), 0);
});

test('layout merges frames narrower than half a pixel and culls nothing visible', () => {
  const lines = ['big 5000'];
  for (let i = 0; i < 5000; i++) lines.push('small;s' + String(i).padStart(5, '0') + ' 1');
  const m = M.flatten(tree(lines));
  const seen = {frames: 0, merged: 0, narrow: 0, mergedWidth: 0};
  const n = M.layout(m, 0, 1000, m.maxLevel, (kind, i, lv, x, w) => {
    if (kind === 0) {
      seen.frames++;
      if (w < M.MIN_PX) seen.narrow++;
    } else if (kind === 1) {
      seen.merged++;
      seen.mergedWidth += w;
    }
  });
  assert.equal(seen.narrow, 0, 'no frame under MIN_PX is drawn on its own');
  assert.equal(seen.frames, 3, 'all, big and small are drawn');
  assert.ok(seen.merged >= 1 && seen.merged < 10, 'the 5000 tiny frames become a few runs: ' + seen.merged);
  assert.ok(Math.abs(seen.mergedWidth - 500) < 1, 'the runs cover the tiny frames\' 500 px');
  assert.equal(n, seen.frames + seen.merged);
});

test('layout of a zoomed frame draws its ancestors full width and only its subtree', () => {
  const m = M.flatten(tree(['a;b;c 2', 'a;b;d 2', 'e 4']));
  const b = M.findPath(m, ['a', 'b']);
  const got = [];
  M.layout(m, b, 100, m.maxLevel, (kind, i, lv, x, w) => got.push([kind, m.names[m.name[i]], lv, x, w]));
  assert.deepEqual(got, [
    [2, 'a', 1, 0, 100], [2, 'all', 0, 0, 100],
    [0, 'b', 2, 0, 100], [0, 'c', 3, 0, 50], [0, 'd', 3, 50, 50]
  ]);
});

test('hitTest finds the frame under a point, respecting the zoom', () => {
  const m = M.flatten(tree(['a;b 2', 'a;c 2', 'e 4']));
  const c = M.findPath(m, ['a', 'c']);
  assert.equal(M.hitTest(m, 0, 2, 3, 0), c);
  assert.equal(M.hitTest(m, 0, 1, 5, 0), M.findPath(m, ['e']));
  assert.equal(M.hitTest(m, 0, 2, 5, 0), -1, 'nothing above e');
  const a = M.findPath(m, ['a']);
  assert.equal(M.hitTest(m, a, 0, 0, 0), 0, 'the root row while zoomed is the ancestor');
  assert.equal(M.hitTest(m, a, 1, 6, 0), -1, 'e is outside the zoomed subtree');
  assert.equal(M.hitTest(m, 0, 2, 3, 3), -1, 'frames narrower than the minimum do not hit');
});

test('names split on dots outside generic brackets', () => {
  assert.deepEqual(M.parts('System.Collections.Generic.Dictionary<System.String,System.Int32>.FindValue'),
    ['System', 'Collections', 'Generic', 'Dictionary<System.String,System.Int32>', 'FindValue']);
  assert.equal(M.shortName('Ns.Sub.Type.Method'), 'Type.Method');
  assert.equal(M.shortName('[native] libcoreclr.so'), '[native] libcoreclr.so');
  assert.equal(M.shortName('[native libcoreclr.so]'), '[native libcoreclr.so]');
  assert.equal(M.shortName('[native libc.so.6!malloc]'), 'malloc');
  assert.equal(M.shortName('[native libcoreclr.so!MethodDesc::DoPrestub]'), 'MethodDesc::DoPrestub');
  assert.equal(M.shortName('[native libcoreclr.so+0x3be610]'), '[native libcoreclr.so+0x3be610]');
  assert.equal(M.shortName('[JIT] compiling Ns.Sub.Type.Work<System.Int32>'), '[JIT] Type.Work<System.Int32>');
  assert.equal(M.shortName('[JIT] compiling a dynamic method'), '[JIT] a dynamic method');
});

test('a differential tree: widths by share, both windows kept, colour steps by the change', () => {
  // window a (base): total 40, Hot1 30; window b: total 100, Hot2 60, Hot1 20
  const reply = {name: 'all', value: 100, self: 0, base: 40, base_self: 0, children: [
    {name: 'Hot1', value: 20, self: 20, base: 30, base_self: 30, children: []},
    {name: 'Hot2', value: 60, self: 60, base: 0, base_self: 0, children: []},
    {name: 'Steady', value: 20, self: 20, base: 10, base_self: 10, children: []}]};
  const t = M.diffTree(reply, 40, 100, true, 1000);
  assert.equal(t.value, 2000, 'the root: all of a plus all of b');
  const by = Object.fromEntries(t.children.map((c) => [c.name, c]));
  assert.equal(by.Hot1.value, 30 / 40 * 1000 + 20 / 100 * 1000);
  assert.equal(by.Hot2.value, 600);
  assert.equal(by.Hot1.a, 30);
  assert.equal(by.Hot1.b, 20);
  const abs = M.diffTree(reply, 40, 100, false, 1000);
  assert.equal(abs.value, 140, 'absolute: a plus b');
  const m = M.flatten(t);
  assert.ok(m.a && m.b, 'the flattened model keeps both windows');
  assert.equal(M.diffStep(0, 60, 40, 100), 4, 'new: the deepest red');
  assert.equal(M.diffStep(30, 0, 40, 100), -4, 'gone: the deepest blue');
  assert.equal(M.diffStep(30, 20, 40, 100), -3, '0.75 to 0.2 of the total');
  assert.equal(M.diffStep(10, 25, 40, 100), 0, 'the same share: grey');
  assert.equal(M.diffStep(0, 0, 40, 100), 0);
  assert.equal(M.diffStep(5, 5, 0, 0), 0, 'empty windows');
});
