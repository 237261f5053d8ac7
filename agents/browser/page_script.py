"""JavaScript the browser worker runs inside pages: navigation tracking and set-of-marks."""

# Added to every document of an episode's context before any page script runs. The Navigation
# API's `navigate` event fires synchronously when the page starts any navigation (link, form,
# location assignment), so one evaluate after an action tells whether the action navigated.
INIT_SCRIPT = """
(() => {
  window.__webgymDoc = Math.random().toString(36).slice(2);
  const mark = () => { window.__webgymNav = true; };
  if (window.navigation) {
    window.navigation.addEventListener('navigate', (e) => { if (!e.hashChange) mark(); });
  }
  window.addEventListener('beforeunload', mark);
  // An episode has one page: links and window.open that would open a tab open here instead
  // (a background tab would also stall the screenshots of this one).
  document.addEventListener('click', (e) => {
    const link = e.target instanceof Element && e.target.closest('a[target], area[target]');
    if (link && link.target !== '_self') link.target = '_self';
  }, true);
  document.addEventListener('submit', (e) => {
    if (e.target.target && e.target.target !== '_self') e.target.target = '_self';
  }, true);
  const open = window.open;
  window.open = (url, name, features) => {
    if (url) { location.href = url; return window; }
    return open.call(window, url, name, features);
  };
  // No text caret in any screenshot, as Playwright's screenshot hides it while it captures: a
  // caret blinks, so the same screen would be captured as two different images (and the
  // repetition filter compares digests). One sheet for the document's life, not two evaluates
  // around every capture; a page that replaces document.adoptedStyleSheets drops it.
  try {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync('*, *::before, *::after { caret-color: transparent !important; }');
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
  } catch (e) {}
})();
"""

# Returns the document's identity, whether it is leaving or still loading, its title, whether
# it follows a page-signals convention PAGE_SIGNALS reads (so a page without one is not asked
# again until it navigates), and whether web fonts are still loading (FONTS_LOADED).
PAGE_STATE = """
() => ({doc: window.__webgymDoc || null, nav: window.__webgymNav === true,
        ready: document.readyState, title: document.title,
        signals: typeof WOB_DONE_GLOBAL !== 'undefined',
        fonts: document.fonts ? document.fonts.status : 'loaded'})
"""

# True once no web font of the document is loading (what Playwright's screenshot waits for).
FONTS_LOADED = "() => !document.fonts || document.fonts.status !== 'loading'"

SETTLED = "() => document.readyState === 'complete' && window.__webgymNav !== true"

# After the browser stopped a page's loading (a navigation cancelled), the document is not
# leaving after all: clear its mark so the next action's settling does not wait on it.
STOPPED = "() => { window.__webgymNav = false; }"

# Numbers every visible, topmost interactive element; returns the marks table and, when asked,
# draws the numbered boxes the set-of-marks prompt refers to (removed again after the screenshot).
MARKS = """
(draw) => {
  document.querySelectorAll('[data-webgym-overlay]').forEach((e) => e.remove());
  document.querySelectorAll('[data-webgym-mark]').forEach((e) => e.removeAttribute('data-webgym-mark'));
  const selector = 'a[href], button, input:not([type=hidden]), select, textarea, summary, ' +
    '[role=button], [role=link], [role=checkbox], [role=tab], [role=menuitem], [onclick]';
  const vw = window.innerWidth, vh = window.innerHeight;
  const overlay = draw ? document.createElement('div') : null;
  if (overlay) {
    overlay.setAttribute('data-webgym-overlay', '');
    overlay.style.cssText = 'position:fixed;inset:0;pointer-events:none;z-index:2147483647';
  }
  const marks = [];
  // Elements made clickable by script (a span with a click handler and a pointer cursor): the
  // outermost pointer element that holds no regular control is marked as 'clickable'.
  const clickable = new Set();
  for (const el of document.querySelectorAll('span, div, li, td, img, label, p, i')) {
    if (el.closest(selector) || el.querySelector(selector)) continue;
    if (getComputedStyle(el).cursor !== 'pointer') continue;
    if (el.parentElement && getComputedStyle(el.parentElement).cursor === 'pointer') continue;
    clickable.add(el);
  }
  for (const el of [...document.querySelectorAll(selector), ...clickable]) {
    const r = el.getBoundingClientRect();
    if (r.width < 2 || r.height < 2 || r.bottom <= 0 || r.right <= 0 || r.top >= vh || r.left >= vw) continue;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || style.display === 'none' || style.opacity === '0') continue;
    const cx = Math.min(Math.max(r.left + r.width / 2, 0), vw - 1);
    const cy = Math.min(Math.max(r.top + r.height / 2, 0), vh - 1);
    const top = document.elementFromPoint(cx, cy);
    if (top && top !== el && !el.contains(top) && !top.contains(el)) continue;
    const id = String(marks.length);
    el.setAttribute('data-webgym-mark', id);
    // The accessible name, roughly: a label names a form control; a checkbox's value never does.
    const label = el.labels && el.labels.length ? el.labels[0].innerText : '';
    const value = (el.type === 'checkbox' || el.type === 'radio') ? '' : el.value;
    const text = el.getAttribute('aria-label') || label || el.innerText || value ||
      el.getAttribute('placeholder') || el.getAttribute('title') || el.getAttribute('name') || '';
    const tag = el.tagName.toLowerCase();
    const role = el.getAttribute('role') || (clickable.has(el) ? 'clickable' : tag === 'a' ? 'link' : tag === 'input' ? (el.type || 'textbox') : tag);
    marks.push({id, role, name: text.trim().replace(/\\s+/g, ' ').slice(0, 80),
                x: Math.round(r.left), y: Math.round(r.top),
                width: Math.round(r.width), height: Math.round(r.height)});
    if (overlay) {
      const box = document.createElement('div');
      box.style.cssText = `position:fixed;left:${r.left}px;top:${r.top}px;width:${r.width}px;` +
        `height:${r.height}px;outline:2px solid #e11;box-sizing:border-box`;
      const label = document.createElement('span');
      label.textContent = id;
      label.style.cssText = 'position:absolute;left:0;top:-14px;background:#e11;color:#fff;' +
        'font:bold 11px sans-serif;padding:0 3px';
      box.appendChild(label);
      overlay.appendChild(box);
    }
  }
  if (overlay) document.documentElement.appendChild(overlay);
  return marks;
}
"""

REMOVE_OVERLAY = (
    "() => document.querySelectorAll('[data-webgym-overlay]').forEach((e) => e.remove())"
)

# What a page reports about itself, if it follows a known convention (MiniWoB++'s core.js
# globals); an empty object otherwise. Values are strings, like the observation's map.
PAGE_SIGNALS = """
() => {
  if (typeof WOB_DONE_GLOBAL === 'undefined') return {};
  const utterance = (typeof core !== 'undefined' && core.getUtterance) ? core.getUtterance() : '';
  return {done: String(WOB_DONE_GLOBAL), reward: String(WOB_REWARD_GLOBAL),
          raw_reward: String(WOB_RAW_REWARD_GLOBAL), reason: String(WOB_REWARD_REASON),
          utterance: utterance};
}
"""

# Named set-ups a navigate operation may ask for after the page loaded (``tasks.page_setup``);
# each is called with the spec's seed (null when it names none). MiniWoB++: start the episode the
# way its own environment does (no START cover to click), with a time limit long enough for a
# policy that thinks between actions; with a seed, seed the page's random numbers first
# (``Math.seedrandom(seed)`` right before ``core.startEpisodeReal()``, as MiniWoB++'s Python
# environment does), so one seed always makes the same problem. Returns whether the page knew how.
SETUPS = {
    "miniwob": """
(seed) => {
  if (typeof core === 'undefined' || !core.startEpisodeReal) return false;
  if (seed != null && typeof Math.seedrandom !== 'function') return false;
  core.EPISODE_MAX_TIME = 120000;
  if (seed != null) Math.seedrandom(seed);  // a number, as MiniWoB++'s environment passes it
  core.startEpisodeReal();
  return true;
}
""",
}
