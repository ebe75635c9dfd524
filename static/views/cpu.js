/* clrscope dashboard: the CPU tab.
 *
 * A flame graph of the on-CPU samples in the window (/api/v1/flamegraph?type=cpu), with its
 * top-functions table; the subtitle says how many cores were busy on average.
 */

import {flameView} from '../flame_panel.js';

export function create() {
  return flameView('CPU time', 'cpu', 'On-CPU samples of managed threads. Width is CPU time; ' +
    'hover a frame for its time, click to zoom, or pick a function in the table below.');
}
