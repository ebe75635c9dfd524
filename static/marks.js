/* clrscope dashboard: the marks (POST /api/v1/marks: "deploy 42"), shared by the views that
 * draw them on their time axes and the Compare tab; asked at most every 5 s. */

import {api} from './requests.js';

var cache = {at: 0, list: [], pending: null};

/* A promise of the marks, oldest first ([] when the endpoint does not answer). */
export function marks(fresh) {
  if (!fresh && Date.now() - cache.at < 5000) return Promise.resolve(cache.list);
  if (cache.pending) return cache.pending;
  cache.pending = api('api/v1/marks', {quiet: true}).then(function (r) {
    cache.pending = null;
    cache.at = Date.now();
    cache.list = r.ok && r.data && r.data.marks || [];
    return cache.list;
  });
  return cache.pending;
}
