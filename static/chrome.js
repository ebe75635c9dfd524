/* clrscope dashboard: the page's header and footer.
 *
 * The tab links (greyed for a profile that is off), the time window and "Pause" buttons' look,
 * the download links of the open tab, the process's name, pid, runtime and uptime, and the footer
 * (clrscope's version, its own cost, and what did not fit in its buffers). app.js calls
 * renderChrome after every state change and renderStatus on every /api/v1/status reply.
 */

import {hook} from './hook.js';
import * as F from './fmt.js';
import {h, $, clear} from './dom.js';
import {state, profileOn, postMortem, reach, hashFor, windowText} from './state.js';
import {TABS, tabInfo} from './tabs.js';

var heapSnapDone = false;   // the selected heap snapshot can be downloaded

/* The heap view says whether its snapshot is done (its download link replaces the pprof ones). */
export function setHeapSnapDone(done) {
  heapSnapDone = done;
}

export function renderChrome() {
  // tab links carry the window so a middle-click opens the same view
  var nav = $('tabs');
  clear(nav);
  TABS.forEach(function (t) {
    var on = profileOn(t.profile);
    var gone = t.running && postMortem(); // the history of an exited process has no threads
    var a = h('a', {
      href: hashFor({tab: t.id, seconds: state.seconds, icicle: state.icicle}),
      text: t.label,
      'class': (t.id === state.tab ? 'on' : '') + ((t.profile && !on) || gone ? ' off' : ''),
      title: gone ? 'needs the running process: this is the history of one that has exited'
        : t.profile && !on ? 'the "' + t.profile + '" profile is not enabled' : ''
    });
    if (t.id === state.tab) a.setAttribute('aria-current', 'page');
    nav.appendChild(a);
  });
  var info = tabInfo(state.tab);
  var seg = $('window');
  seg.classList.toggle('disabled', !!info.nowindow);
  seg.title = info.nowindow ? 'this view is not windowed' : 'time window';
  var far = reach();
  var preset = false;
  Array.prototype.forEach.call(seg.querySelectorAll('button[data-seconds]'), function (b) {
    var secs = +b.getAttribute('data-seconds');
    preset = preset || secs === state.seconds;
    b.hidden = secs > far; // the hour buttons: only while the history on disk reaches that far
    var on = secs === state.seconds;
    b.classList.toggle('on', on);
    b.setAttribute('aria-pressed', String(on));
  });
  var custom = $('window-custom');
  custom.textContent = preset ? '…' : windowText();
  custom.classList.toggle('on', !preset);
  custom.setAttribute('aria-pressed', String(!preset));
  var pause = $('pause');
  pause.textContent = state.paused ? 'Paused · resume' : 'Pause';
  pause.classList.toggle('on', state.paused);
  pause.setAttribute('aria-pressed', String(state.paused));
  renderDownloads(info);
}

export function renderDownloads(info) {
  var box = clear($('downloads'));
  var list = info.pprof;
  if (info.id === 'overview') {
    list = [];
    TABS.forEach(function (t) {
      if (t.pprof && t.profile && profileOn(t.profile)) list = list.concat(t.pprof);
    });
  }
  if (info.id === 'heap' && state.snap && heapSnapDone) {
    box.appendChild(h('a', {href: 'api/v1/gcdump/' + encodeURIComponent(state.snap) + '/file',
      text: '⤓ snapshot ' + state.snap + '.gcdump', attrs: {download: 'clrscope-' + state.snap + '.gcdump'}}));
    return;
  }
  if (info.profile && !profileOn(info.profile)) return;
  if (!list || !list.length) return;
  box.appendChild(h('span', {text: 'pprof'}));
  list.forEach(function (d) {
    // the window on screen, at once: CPU and wall would otherwise record the next N seconds
    // (Go's semantics, which `go tool pprof URL` keeps)
    var href = d[1] + (d[2] ? '?seconds=' + state.seconds : '') +
      (/\/(profile|wall)$/.test(d[1]) ? '&wait=0' : '');
    box.appendChild(h('a', {href: href, text: '⤓ ' + d[0], title: 'download ' + href,
      attrs: {download: d[0] + '.pb.gz'}}));
  });
}

var DROPPED = [['events', 'events'], ['stack_nodes', 'stack nodes'], ['entries', 'profile entries'],
  ['names', 'names']];

export function renderStatus(s) {
  var name = s.process && s.process.name || 'process';
  $('h-name').textContent = name;
  $('h-name').title = s.process && s.process.cmdline || '';
  // a post-mortem server (`clrscope serve`) shows the pid of the process whose history it is
  var pid = s.mode === 'post-mortem' ? s.served_pid : s.pid;
  $('h-pid').textContent = pid != null ? String(pid) + (s.mode === 'post-mortem' ? ' (exited)' : '') : '–';
  $('h-runtime').textContent = s.runtime && s.runtime.version || '–';
  $('h-uptime').textContent = F.duration(s.uptime_s);
  var chips = clear($('h-profiles'));
  (s.profiles || []).forEach(function (p) { chips.appendChild(h('span', {'class': 'chip', text: p})); });
  var foot = ['clrscope ' + (s.clrscope_version || '')];
  if (s.sampling_hz) foot.push('sampling ' + s.sampling_hz + ' Hz');
  if (s.self) foot.push('clrscope CPU ' + F.pct(s.self.cpu_share) + (s.self.mem_bytes != null ? ', memory ' +
    F.bytes(s.self.mem_bytes) : '') + ' · process RSS ' + F.bytes(s.self.rss_bytes));
  // what did not fit in clrscope's bounded buffers (the status's "dropped")
  var lost = [];
  DROPPED.forEach(function (d) {
    var n = s.dropped && s.dropped[d[0]];
    if (n > 0) lost.push(F.int(n) + ' ' + d[1]);
  });
  if (lost.length) foot.push('dropped: ' + lost.join(', '));
  $('footer').textContent = foot.join(' · ');
  $('footer').title = lost.length ? 'Data that did not fit in clrscope\'s bounded buffers and tables ' +
    '(/api/v1/status "dropped"; the caps are CLRSCOPE_* settings, see the README).' : '';
  document.title = name + ' (' + s.pid + ') · clrscope';
  hook.pid = s.pid;
  hook.status = s;
}
