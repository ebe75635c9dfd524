/* clrscope dashboard: the Wall tab.
 *
 * A flame graph of the wall-clock samples in the window (/api/v1/flamegraph?type=wall): every
 * managed thread, running or not; the subtitle says how many threads that is on average.
 */

import {flameView} from '../flame_panel.js';

export function create() {
  return flameView('Wall-clock time', 'wall', 'Samples of every managed thread whether running, ' +
    'waiting or blocked: shows where threads spend elapsed time, including I/O and locks.');
}
