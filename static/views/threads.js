/* clrscope dashboard: the Threads tab.
 *
 * A thread dump (/api/v1/threads): every managed thread's stack at one moment, identical stacks
 * grouped, with the deadlocks and thread pool starvation it shows. Taken when the tab opens and on
 * the button, never by the page's polling: each dump suspends the runtime.
 */

import {hook} from '../hook.js';
import * as F from '../fmt.js';
import {h, clear, panel, unavailable, notAvailableText, stat} from '../dom.js';
import {api} from '../requests.js';

// A frame of the app's own code, not the framework's or native: what a reader looks for first.
function appFrame(f) {
  return !/^(System\.|Microsoft\.|Interop\.|\[)/.test(f);
}

export function create() {
  var p = panel('Thread dump', '');
  var takeBtn = h('button', {'class': 'btn primary', type: 'button', text: 'Take thread dump'});
  var textLink = h('a', {href: 'debug/pprof/threads?debug=2', text: '⤓ as text', title: 'every thread, one by one (Go\'s goroutine?debug=2 form)',
    attrs: {download: 'threads.txt'}});
  p.right.appendChild(textLink);
  p.right.appendChild(takeBtn);
  var search = h('input', {'class': 'search', type: 'search', attrs: {placeholder: 'Filter frames or thread names (regex)…', 'aria-label': 'filter threads'}});
  var summary = h('div', {'class': 'stats'});
  var alerts = h('div');
  var list = h('div', {'class': 'tgroups'});
  var msg = h('div');
  p.body.appendChild(h('div', {'class': 'note', text: 'Every managed thread\'s stack at one moment (leaf first), identical ' +
    'stacks grouped. Taking one stops the runtime for well under a millisecond per few dozen threads, like a wall sample. ' +
    'Lock waits and deadlocks come from the lock profile\'s contention events (Monitor and System.Threading.Lock).'}));
  p.body.appendChild(msg);
  p.body.appendChild(summary);
  p.body.appendChild(alerts);
  p.body.appendChild(h('div', {'class': 'row'}, search));
  p.body.appendChild(list);
  var dump = null;
  var open = {};   // group index -> the whole stack is shown
  var filterText = '';

  search.addEventListener('input', function () {
    filterText = search.value.trim();
    render();
  });
  takeBtn.addEventListener('click', function () { take(); });

  function matcher() {
    if (!filterText) return null;
    var re = null;
    try { re = new RegExp(filterText, 'i'); } catch (e) { re = null; }
    var low = filterText.toLowerCase();
    return function (text) { return re ? re.test(text) : text.toLowerCase().indexOf(low) >= 0; };
  }

  function threadLabel(t) {
    return t.tid + (t.name ? ' "' + t.name + '"' : '');
  }

  function waitText(t) {
    var w = t.waiting_for;
    return 'waiting ' + F.duration(w.for_s) + ' for lock ' + w.lock +
      (w.owner_tid != null ? ' held by ' + w.owner_tid + (w.owner_name ? ' "' + w.owner_name + '"' : '') : '');
  }

  function render() {
    clear(summary);
    clear(alerts);
    clear(list);
    if (!dump) return;
    var d = dump;
    p.sub(F.int(d.threads_total) + ' threads in ' + F.int(d.groups.length) + ' distinct stacks · taken ' +
      F.time(d.t) + ' · runtime suspended ' + d.suspend_ms.toFixed(2) + ' ms' +
      (d.omitted ? ' · ' + F.int(d.omitted) + ' more omitted (CLRSCOPE_MAX_THREADS)' : ''));
    Object.keys(d.states || {}).forEach(function (k) { summary.appendChild(stat(k, F.int(d.states[k]))); });
    summary.appendChild(stat('deadlocks', F.int((d.deadlocks || []).length), (d.deadlocks || []).length ? 'bad' : ''));
    var tp = d.thread_pool;
    if (tp && tp.workers) {
      summary.appendChild(stat('pool workers', F.int(tp.workers)));
      summary.appendChild(stat('idle', F.int(tp.idle), tp.idle ? '' : 'bad'));
      summary.appendChild(stat('blocked in a work item', F.int(tp.blocked), tp.blocked ? 'bad' : ''));
      if (tp.queue_length != null) summary.appendChild(stat('queued items', F.int(tp.queue_length)));
    }
    if (tp && tp.starvation_likely) {
      var sb = h('div', {'class': 'warnbox', attrs: {role: 'alert'}}, [
        h('strong', {text: 'Thread pool starvation is likely. '}),
        'None of the ' + tp.workers + ' pool threads is idle and ' + tp.blocked + ' of them are blocked inside the work item ' +
        'they run (.Result, .Wait(), a lock or synchronous I/O in code the pool runs)' +
        (tp.queue_length ? ', while ' + F.int(tp.queue_length) + ' items wait in the queue' : '') +
        ': new requests and continuations wait until the pool adds threads, slowly. Blocked at: ' +
        (tp.blocked_at || []).map(function (x) { return x.frame + ' (' + x.count + ')'; }).join(', ') + '.'
      ]);
      alerts.appendChild(sb);
    }
    var nameOf = {};
    d.groups.forEach(function (g) { g.threads.forEach(function (t) { nameOf[t.tid] = t.name; }); });
    (d.deadlocks || []).forEach(function (c, i) {
      var box = h('div', {'class': 'deadlock', attrs: {role: 'alert'}}, [
        h('strong', {text: 'Deadlock' + ((d.deadlocks.length > 1) ? ' ' + (i + 1) : '') + ': ' + c.threads.length +
          ' threads, each waiting for a lock the next one holds'})]);
      c.threads.forEach(function (t) {
        box.appendChild(h('div', {'class': 'mono', text: 'thread ' + threadLabel(t) + ' waits for lock ' + t.waits_for_lock +
          ' held by ' + threadLabel({tid: t.held_by, name: nameOf[t.held_by]})}));
      });
      alerts.appendChild(box);
    });
    var m = matcher();
    var shown = 0;
    d.groups.forEach(function (g, gi) {
      if (m && !g.frames.some(m) && !g.threads.some(function (t) { return m(t.name || '') || m(String(t.tid)); })) return;
      shown++;
      var states = {};
      g.threads.forEach(function (t) { states[t.state] = (states[t.state] || 0) + 1; });
      var top = g.frames.filter(appFrame)[0] || g.frames[0] || '';
      var names = g.threads.slice(0, 6).map(threadLabel).join(', ') + (g.threads.length > 6 ? ' and ' + (g.threads.length - 6) + ' more' : '');
      var head = h('div', {'class': 'tgroup-head'}, [
        h('span', {'class': 'badge', text: g.count + (g.count === 1 ? ' thread' : ' threads')})
      ].concat(Object.keys(states).map(function (k) {
        return h('span', {'class': 'chip state-' + k, text: states[k] + ' ' + k});
      }), [
        h('span', {'class': 'mono top', text: top}),
        g.threads.some(function (t) { return t.deadlock; }) ? h('span', {'class': 'chip bad', text: 'deadlock'}) : null
      ]));
      var body = [h('div', {'class': 'note', text: names})];
      g.threads.filter(function (t) { return t.waiting_for; }).slice(0, 8).forEach(function (t) {
        body.push(h('div', {'class': 'note wait', text: 'thread ' + threadLabel(t) + ' ' + waitText(t) + (t.deadlock ? ' (deadlock)' : '')}));
      });
      var frames = open[gi] || g.frames.length <= 12 ? g.frames : g.frames.slice(0, 10);
      var stack = h('ol', {'class': 'tstack'}, frames.map(function (f) {
        return h('li', {'class': appFrame(f) ? 'app' : 'fw', text: f});
      }));
      body.push(stack);
      if (g.truncated) body.push(h('div', {'class': 'note', text: '[truncated: deeper than CLRSCOPE_MAX_FRAMES]'}));
      if (frames.length < g.frames.length) {
        body.push(h('button', {'class': 'btn link', type: 'button', text: 'show all ' + g.frames.length + ' frames',
          on: {click: function () { open[gi] = true; render(); }}}));
      }
      list.appendChild(h('div', {'class': 'tgroup'}, [head].concat(body)));
    });
    if (!shown) list.appendChild(h('div', {'class': 'note', text: m ? 'No thread matches the filter.' : 'No managed threads.'}));
  }

  function take() {
    takeBtn.disabled = true;
    return api('api/v1/threads', {sticky: true}).then(function (r) {
      takeBtn.disabled = false;
      if (r.aborted) return;
      clear(msg);
      if (!r.ok) {
        msg.appendChild(unavailable(notAvailableText(r)));
        return;
      }
      dump = r.data;
      hook.threadDump = {seq: dump.seq, threads: dump.threads_total, groups: dump.groups.length,
        deadlocks: (dump.deadlocks || []).length, starvation: !!(dump.thread_pool && dump.thread_pool.starvation_likely)};
      render();
    });
  }

  var first = true;
  return {
    el: p.el,
    // taken when the tab opens and on the button, never by the page's polling: each dump stops the world
    refresh: function () {
      if (!first) return Promise.resolve();
      first = false;
      return take();
    },
    interval: function () { return 3600 * 1000; }
  };
}
