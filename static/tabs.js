/* clrscope dashboard: the tabs, in the order the page lists them.
 *
 * id: the tab's name in the URL (#tab=…) and its view, views/<id>.js (app.js maps one to the
 * other); label: the link's text; profile: the CLRSCOPE_PROFILES entry the view needs (off: the
 * tab is greyed and says so); pprof: the header's download links, [name, path, windowed];
 * nowindow: the time window does not apply (the selector is greyed); running: it needs the
 * running process (greyed in a post-mortem server, `clrscope serve`).
 */

export var TABS = [
  {id: 'overview', label: 'Overview'},
  {id: 'cpu', label: 'CPU', profile: 'cpu', pprof: [['cpu', 'debug/pprof/profile', true]]},
  {id: 'wall', label: 'Wall', profile: 'wall', pprof: [['wall', 'debug/pprof/wall', true]]},
  {id: 'alloc', label: 'Allocations', profile: 'alloc', pprof: [['allocs', 'debug/pprof/allocs', true]]},
  {id: 'live', label: 'Live objects', profile: 'live', pprof: [['heap', 'debug/pprof/heap', false]], nowindow: true},
  {id: 'gc', label: 'GC', profile: 'gc'},
  {id: 'exceptions', label: 'Exceptions', profile: 'exceptions', pprof: [['exceptions', 'debug/pprof/exceptions', true]]},
  {id: 'locks', label: 'Locks', profile: 'lock', pprof: [['lock', 'debug/pprof/lock', true]]},
  {id: 'heap', label: 'Heap snapshots', profile: 'heap', nowindow: true},
  {id: 'threads', label: 'Threads', nowindow: true, running: true, pprof: [['threads', 'debug/pprof/threads', false]]},
  {id: 'diff', label: 'Compare', nowindow: true}
];

export function tabInfo(id) {
  for (var i = 0; i < TABS.length; i++) if (TABS[i].id === id) return TABS[i];
  return TABS[0];
}
