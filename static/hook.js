/* clrscope dashboard: window.__clrscope, the page's test hook.
 *
 * The browser tests (tests/browser) read it: what the flame graph drew (framesDrawn, lastRenderMs,
 * renders, flame, flameNodes), the page's state (pid, status, tab, refreshes, firstRefreshAt,
 * paused, down, perSecond, threadDump), and lastError and cspViolations, which must stay empty.
 * Every module that writes to it imports this one, so it exists before any of them runs.
 */

export var hook = window.__clrscope = window.__clrscope || {};
hook.framesDrawn = hook.framesDrawn || 0;
hook.lastError = hook.lastError || null;
hook.cspViolations = hook.cspViolations || [];

export function noteError(msg) {
  hook.lastError = String(msg);
}

window.addEventListener('error', function (e) {
  noteError(e.message || e.error || 'error');
});
window.addEventListener('unhandledrejection', function (e) {
  noteError(e.reason && e.reason.message || e.reason || 'unhandled rejection');
});
document.addEventListener('securitypolicyviolation', function (e) {
  hook.cspViolations.push(e.violatedDirective + ' ' + (e.blockedURI || ''));
});
