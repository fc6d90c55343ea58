// agent_state inspector. The server inlines this file right after client/src/index.js in one
// module, so `watch` and `applyMergePatch` are in scope; everything here lives inside one arrow
// function so that no name of ours can collide with the client's. States are untrusted: the DOM
// is built with createElement/textContent only. Styling is by class (the CSP forbids style=).
(() => {
  const $ = (id) => document.getElementById(id);
  const query = new URLSearchParams(location.search);
  const TOKEN = query.get('access_token') || '';
  // The token stays in this page's memory only: it leaves the address bar and this history
  // entry at once (someone looking at the screen, a bookmark, a shared link), and a reload needs
  // the link the server printed again (the page itself is behind the token).
  if (query.has('access_token')) {
    query.delete('access_token');
    const rest = query.toString();
    history.replaceState(history.state, '', `${location.pathname}${rest ? `?${rest}` : ''}${location.hash}`);
  }
  const PAGE_SIZE = Math.min(1000, Math.max(1, parseInt(query.get('page_size'), 10) || 50));
  const HISTORY_SHOWN = 200; // newest changes kept in the timeline
  const CHILDREN_SHOWN = 1000; // entries of one object/array rendered in a tree

  function h(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // ---- formatting -------------------------------------------------------------------------
  const pad = (n) => String(n).padStart(2, '0');
  const clock = (ms) => { const d = new Date(ms); return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`; };
  const day = (ms) => { const d = new Date(ms); return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`; };
  const stamp = (ms) => (day(ms) === day(Date.now()) ? clock(ms) : `${day(ms)} ${clock(ms)}`);
  function ago(ms) {
    const s = Math.round((Date.now() - ms) / 1000);
    if (s < 60) return s < 5 ? 'just now' : `${s} s ago`;
    return s < 3600 ? `${Math.floor(s / 60)} min ago` : s < 86400 ? `${Math.floor(s / 3600)} h ago` : day(ms);
  }
  const bytes = (n) => (n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(1)} MiB`);
  const brief = (v, max = 140) => { const s = JSON.stringify(v); return s.length > max ? `${s.slice(0, max - 1)}…` : s; };
  const pretty = (v) => { const s = JSON.stringify(v); return s.length <= 72 ? s : JSON.stringify(v, null, 2); };
  const label = (id) => (id === '' ? '(the file’s agent)' : id);
  function whenEl(ms, cls) { // a time that says how long ago, refreshed by the ticker below
    const e = Object.assign(h('span', `when ${cls}`, ago(ms)), { title: new Date(ms).toString() });
    e.dataset.ms = String(ms);
    return e;
  }

  // ---- HTTP -------------------------------------------------------------------------------
  class ApiError extends Error { constructor(status, code, message) { super(message); Object.assign(this, { status, code }); } }
  async function api(path) {
    const res = await fetch(path, { headers: { Authorization: `Bearer ${TOKEN}` }, cache: 'no-store' })
      .catch((e) => { throw new ApiError(0, 'network', `the server cannot be reached (${e.message})`); });
    const body = await res.json().catch(() => null);
    if (res.ok) return body;
    const err = (body && body.error) || {};
    throw new ApiError(res.status, err.code || `http_${res.status}`, err.message || res.statusText);
  }
  const agentPath = (id) => `/v1/agents/${encodeURIComponent(id)}`;

  // ---- status line: errors are kept (up to 50) until dismissed ------------------------------
  const errors = [];
  function describe(err) {
    if (err instanceof ApiError) return `${err.status ? `${err.status} ${err.code}` : err.code}: ${err.message || 'failed'}`;
    if (!err || typeof err !== 'object') return String(err);
    return `${err.code !== undefined ? `${err.code} ` : ''}${err.message || err.reason || err.type || JSON.stringify(err)}`;
  }
  function reportError(what, err) { // a repeat of the latest error only counts it again
    const text = `${what}: ${describe(err)}`;
    const last = errors[errors.length - 1];
    if (last && last.text === text) Object.assign(last, { at: Date.now(), n: last.n + 1 });
    else errors.push({ at: Date.now(), text, n: 1 });
    if (errors.length > 50) errors.shift();
    renderStatus();
  }
  function renderStatus() {
    const st = $('status');
    $('status-clear').hidden = errors.length === 0;
    st.className = `status ${errors.length ? 'status-error' : 'status-ok'}`;
    st.title = errors.map((e) => `${clock(e.at)} ${e.text}`).join('\n');
    const last = errors[errors.length - 1];
    const more = `${last && last.n > 1 ? ` (×${last.n})` : ''}${errors.length > 1 ? `  (+${errors.length - 1} earlier)` : ''}`;
    $('status-text').textContent = last ? `${clock(last.at)} ${last.text}${more}` : `Connected to ${location.host}`;
  }
  window.addEventListener('error', (e) => reportError('page', e.error || e.message));
  window.addEventListener('unhandledrejection', (e) => reportError('page', e.reason));

  // ---- JSON helpers and the before/after diff -------------------------------------------------
  const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
  const typeOf = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
  const ptr = (base, key) => `${base}/${String(key).replace(/~/g, '~0').replace(/\//g, '~1')}`;
  const parentOf = (p) => p.slice(0, p.lastIndexOf('/'));
  function same(a, b) {
    if (a === b) return true;
    if (typeOf(a) !== typeOf(b) || a === null || typeof a !== 'object') return false;
    if (Array.isArray(a)) return a.length === b.length && a.every((x, i) => same(x, b[i]));
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && same(a[k], b[k]));
  }
  // Paths (JSON Pointers) added, removed or changed from a to b, with the old and new values.
  function diff(a, b, path = '', out = []) {
    if (same(a, b)) return out;
    if (isObj(a) && isObj(b)) {
      for (const k of Object.keys(a)) if (!Object.hasOwn(b, k)) out.push({ op: 'removed', path: ptr(path, k), old: a[k] });
      for (const k of Object.keys(b)) {
        if (!Object.hasOwn(a, k)) out.push({ op: 'added', path: ptr(path, k), now: b[k] });
        else diff(a[k], b[k], ptr(path, k), out);
      }
    } else if (Array.isArray(a) && Array.isArray(b)) {
      const n = Math.min(a.length, b.length);
      for (let i = 0; i < n; i++) diff(a[i], b[i], ptr(path, i), out);
      for (let i = n; i < b.length; i++) out.push({ op: 'added', path: ptr(path, i), now: b[i] });
      for (let i = n; i < a.length; i++) out.push({ op: 'removed', path: ptr(path, i), old: a[i] });
    } else out.push({ op: 'changed', path, old: a, now: b });
    return out;
  }
  const counts = (d) => d.reduce((n, x) => { n[x.op]++; return n; }, { added: 0, removed: 0, changed: 0 });
  const countText = (n) => `${n.added} added, ${n.changed} changed, ${n.removed} removed`;

  // ---- the collapsible JSON tree --------------------------------------------------------------
  // Every object/array node (div.node) and every leaf value (span.value) has data-path, its JSON
  // Pointer ("" the root, "/user/name", "/messages/0"). Children are built only when expanded.
  class Tree {
    constructor(el) {
      Object.assign(this, { el, value: undefined, mode: 'auto' });
      this.open = new Map(); // path -> expanded, where the user chose
      this.marks = new Map(); // path -> 'added' | 'changed' (the last update)
      this.inner = new Set(); // ancestors of marked or removed paths
      el.addEventListener('click', (ev) => {
        const t = ev.target.closest('.toggle, .summary');
        if (t && el.contains(t)) this.toggle(t.closest('.node'));
      });
    }
    set(value, changes) {
      this.value = value;
      this.marks = new Map();
      this.inner = new Set();
      for (const c of changes || []) {
        if (c.op !== 'removed') this.marks.set(c.path, c.op);
        for (let p = c.path; p !== ''; ) { p = parentOf(p); this.inner.add(p); }
      }
      this.render();
    }
    notice(text, cls) { this.value = undefined; this.el.replaceChildren(h('p', `notice ${cls || ''}`, text)); }
    expandAll(on) { this.mode = on ? 'expand' : 'collapse'; this.open.clear(); this.render(); }
    render() { if (this.value !== undefined) this.el.replaceChildren(this.node(null, this.value, '', 0)); }
    isOpen(path, depth, size) {
      if (path === '') return true;
      if (this.open.has(path)) return this.open.get(path);
      if (this.mode !== 'auto') return this.mode === 'expand';
      return depth < 4 && size <= 60;
    }
    toggle(node) {
      const path = node.dataset.path;
      if (path === '') return;
      this.open.set(path, !node.classList.contains('open'));
      node.replaceWith(this.node(node.jsonKey, node.jsonValue, path, node.jsonDepth));
    }
    node(key, v, path, depth) {
      const el = h('div', `node ${this.marks.get(path) || ''}`);
      const row = h('div', 'row');
      const leaf = v === null || typeof v !== 'object';
      const arr = Array.isArray(v);
      const entries = leaf ? [] : arr ? v.map((x, i) => [i, x]) : Object.entries(v);
      const n = entries.length;
      const open = path === '' || (n > 0 && this.isOpen(path, depth, n));
      if (n > 0) {
        const t = h('button', 'toggle');
        t.type = 'button';
        t.setAttribute('aria-expanded', String(open));
        t.setAttribute('aria-label', open ? 'collapse' : 'expand');
        row.append(t);
      } else row.append(h('span', 'spacer'));
      if (key !== null) row.append(h('span', typeof key === 'number' ? 'index' : 'key', String(key)), h('span', 'colon', ': '));
      el.append(row);
      if (leaf) {
        const val = h('span', `value t-${typeOf(v)}`, JSON.stringify(v));
        val.dataset.path = path;
        row.append(val);
        return el;
      }
      el.dataset.path = path;
      el.jsonKey = key; el.jsonValue = v; el.jsonDepth = depth;
      if (this.inner.has(path)) el.classList.add('inner-changed');
      const what = arr ? `${n} item${n === 1 ? '' : 's'}` : `${n} key${n === 1 ? '' : 's'}`;
      row.append(h('span', 'summary', n === 0 ? (arr ? '[]' : '{}') : arr ? `[ ${what} ]` : `{ ${what} }`));
      if (path === '') row.remove();
      if (open) {
        el.classList.add('open');
        const kids = h('div', path === '' ? 'root' : 'children');
        for (const [k, x] of entries.slice(0, CHILDREN_SHOWN)) kids.append(this.node(k, x, ptr(path, k), depth + 1));
        if (n > CHILDREN_SHOWN) kids.append(h('div', 'row muted', `… ${n - CHILDREN_SHOWN} more not shown`));
        if (path === '' && n === 0) kids.append(h('div', 'row muted', '{} (empty state)'));
        el.append(kids);
      }
      return el;
    }
  }
  const stateTree = new Tree($('state'));
  const atTree = new Tree($('at-version-state'));

  // ---- the agent list ---------------------------------------------------------------------
  const list = { prefix: '', next: null, rows: new Map(), gen: 0 };
  function agentRow(a) {
    const li = h('li', 'agent-row');
    const b = Object.assign(h('button', 'agent-item'), { type: 'button' });
    b.dataset.id = li.dataset.id = a.id;
    const [ver, when, meta] = [h('span', 'a-version', `v${a.version}`), whenEl(a.written_at, 'a-when'), h('span', 'agent-meta')];
    meta.append(ver, h('span', 'a-bytes', bytes(a.bytes)), when);
    b.append(h('span', 'agent-name', label(a.id)), meta);
    li.append(b);
    list.rows.set(a.id, { button: b, ver, when });
    return li;
  }
  async function loadAgents(append) {
    const gen = append ? list.gen : ++list.gen;
    const q = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (list.prefix !== '') q.set('prefix', list.prefix);
    if (append && list.next !== null) q.set('after', list.next);
    let body;
    try { body = await api(`/v1/agents?${q}`); } catch (e) { reportError('agent list', e); return; }
    if (gen !== list.gen) return;
    if (!append) { $('agents').replaceChildren(); list.rows.clear(); }
    for (const a of body.agents) if (!list.rows.has(a.id)) $('agents').append(agentRow(a));
    list.next = body.next === undefined ? null : body.next;
    $('more').hidden = list.next === null;
    $('agents-empty').hidden = list.rows.size > 0;
    $('agents-count').textContent = `${list.rows.size}${list.next === null ? '' : '+'}`;
    markSelected();
  }
  function markSelected() {
    for (const [id, r] of list.rows) r.button.classList.toggle('selected', cur !== null && cur.id === id);
  }

  // ---- one agent: live state, history, state at a version --------------------------------------
  let cur = null;
  function selectFromHash() {
    const id = new URLSearchParams(location.hash.slice(1)).get('agent');
    if (id === null) { deselect(); return; }
    if (!cur || cur.id !== id) select(id);
  }
  function deselect() {
    if (cur && cur.handle) cur.handle.stop();
    cur = null;
    $('agent').hidden = true; $('empty').hidden = false;
    markSelected();
  }
  function select(id) {
    if (cur && cur.handle) cur.handle.stop();
    const me = { id, state: undefined, version: 0, current: 0, changes: [], total: 0, lastSeen: 0,
      first: 0, base: null, loaded: false, logOff: false, busy: false, pending: false, follow: true, atSeq: 0, handle: null };
    cur = me;
    $('agent').hidden = false; $('empty').hidden = true;
    $('agent-id').textContent = label(id);
    $('version').textContent = 'version –';
    for (const k of ['last-change', 'history-count', 'at-version-label']) $(k).textContent = '';
    $('history').replaceChildren(h('p', 'notice', 'Loading the change log…'));
    for (const i of [$('at-version'), $('at-version-number')]) { i.disabled = false; i.value = '0'; }
    for (const t of [stateTree, atTree]) { t.open.clear(); t.mode = 'auto'; }
    stateTree.notice('Connecting to the watch stream…');
    atTree.notice('Loading…');
    markSelected();
    try {
      me.handle = watch(location.origin, id, {
        token: TOKEN,
        onState: (state, version, message) => { if (cur === me) onLive(me, state, version, message); },
        onError: (err) => { if (cur === me) reportError(`watch ${label(id)}`, err); },
      });
    } catch (e) { reportError(`watch ${label(id)}`, e); }
    refreshHistory(me);
  }

  function onLive(me, state, version, message) {
    const first = me.state === undefined;
    const changes = first ? null : diff(me.state, state);
    Object.assign(me, { state, version, current: Math.max(me.current, version) });
    stateTree.set(state, changes);
    $('version').textContent = `version ${version}`;
    if (!first) {
      const kind = (message && message.type) || 'update';
      $('last-change').textContent = `last update ${clock(Date.now())}: v${version} (${kind}), ${countText(counts(changes))}`;
      const r = list.rows.get(me.id);
      if (r) { r.ver.textContent = `v${version}`; r.when.dataset.ms = String(Date.now()); }
    }
    refreshHistory(me); // also the first time: the agent may have had nothing stored before
    updateAtRange(me);
  }

  // The timeline: fetched incrementally (since the last change seen), a page at a time (each
  // answer's `next` says another follows), newest first. Calls that come while a fetch is under
  // way are folded into one more fetch after it.
  async function refreshHistory(me) {
    if (me.logOff) return;
    if (me.busy) { me.pending = true; return; }
    me.busy = true;
    try {
      do {
        me.pending = false;
        let body;
        try {
          body = await fetchChanges(me);
        } catch (e) {
          if (cur !== me) return;
          if (e.code === 'change_log_off') { logOff(me); return; }
          if (!me.total) $('history').replaceChildren(h('p', 'notice notice-error', describe(e)));
          if (e.status === 404 && me.state === undefined) stateTree.notice('Nothing is stored for this agent yet.');
          reportError(`history of ${label(me.id)}`, e);
          return;
        }
        if (cur !== me) return;
        const fresh = body.changes.filter((c) => c.version > me.lastSeen);
        if (!me.total && fresh.length && fresh[0].version > 1) await loadBase(me, fresh[0].version - 1);
        if (cur !== me) return;
        me.current = Math.max(me.current, body.version);
        addChanges(me, fresh);
        updateAtRange(me);
        // The server answers the history a page at a time: the next one follows at once.
        if (body.next !== null && body.next !== undefined) me.pending = true;
      } while (me.pending);
    } finally { me.busy = false; }
  }
  // The changes after me.lastSeen; when the log no longer holds them all (410), those it holds:
  // after the oldest retained version that the error names, else found by bisection.
  async function fetchChanges(me) {
    const get = (since) => api(`${agentPath(me.id)}/changes?since=${since}`);
    const gone = (e) => { if (e.status !== 410) throw e; };
    try { return await get(me.lastSeen); } catch (e) {
      gone(e);
      const m = /oldest retained: (\d+)/.exec(e.message || '');
      if (m) try { return await get(Number(m[1]) - 1); } catch (e2) { gone(e2); }
    }
    let lo = me.lastSeen; // gone
    let hi = Math.max(me.current, me.version) || (await api(agentPath(me.id))).version; // never gone
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      try { await get(mid); hi = mid; } catch (e) { gone(e); lo = mid; }
    }
    return get(hi);
  }
  // The state before the oldest retained change, when the log still has it (for its diff).
  async function loadBase(me, version) {
    try { me.base = await api(`${agentPath(me.id)}/state?version=${version}`); } catch (e) {
      if (e.status !== 410) reportError(`state of ${label(me.id)} at version ${version}`, e);
    }
  }
  function logOff(me) {
    me.logOff = true;
    $('history').replaceChildren(h('p', 'notice log-off', 'The change log is off for this store, so it keeps no '
      + 'history. A writing command switches it on, e.g. agent-state set --change-log \'{"keep_last":1000}\' …'));
    $('history-count').textContent = 'change log off';
    for (const i of [$('at-version'), $('at-version-number')]) i.disabled = true;
    $('at-version-label').textContent = '';
    atTree.notice('Older versions need the change log, which is off for this store.', 'log-off');
  }

  function addChanges(me, fresh) {
    const box = $('history');
    if (!me.total) box.replaceChildren();
    if (!me.total && !fresh.length) box.append(h('p', 'notice', 'No change retained yet.'));
    for (const c of fresh) {
      const prev = me.changes[me.changes.length - 1];
      let before;
      if (prev) before = prev.version === c.version - 1 ? prev.next : undefined;
      else if (c.version === 1) before = {};
      else if (me.base && me.base.version === c.version - 1) before = me.base.state;
      c.diff = before === undefined ? null : diff(before, c.next);
      if (!me.total) { me.first = c.version; box.replaceChildren(); }
      me.changes.push(c); me.total++; me.lastSeen = c.version;
      box.prepend(changeEntry(c, me.loaded));
    }
    if (me.changes.length > HISTORY_SHOWN) me.changes.splice(0, me.changes.length - HISTORY_SHOWN);
    box.querySelectorAll('.change').forEach((el, i) => {
      if (i < 3 && el.dataset.auto === 'new') { el.open = true; el.dataset.auto = 'open'; }
      if (i >= 3 && el.dataset.auto === 'open') { el.open = false; delete el.dataset.auto; }
      if (i >= HISTORY_SHOWN) el.remove();
    });
    const hidden = me.total - Math.min(me.total, HISTORY_SHOWN);
    let note = box.querySelector('.history-note');
    if (hidden > 0 || me.first > 1) {
      if (!note) { note = h('p', 'history-note muted'); box.append(note); }
      note.textContent = hidden > 0 ? `${hidden} older change${hidden === 1 ? '' : 's'} not shown`
        : `versions before ${me.first} are no longer in the change log`;
    }
    $('history-count').textContent = `${me.total} change${me.total === 1 ? '' : 's'}`;
    me.loaded = true;
  }
  function changeEntry(c, live) {
    // The log's kind: a merge patch shows as "patch" (its watch message's type), a JSON Patch
    // as "json_patch"; a log without kinds tells them apart by the patch alone.
    const kind = c.kind === 'json_patch' || c.kind === 'migration' ? c.kind
      : c.patch === null ? 'replace' : Array.isArray(c.patch) ? 'json_patch' : 'patch';
    const d = h('details', `change${live ? ' fresh' : ''}`);
    Object.assign(d.dataset, { version: String(c.version), kind, auto: 'new' });
    const s = h('summary');
    const time = Object.assign(h('span', 'c-time', stamp(c.at)), { title: new Date(c.at).toString() });
    s.append(h('span', 'c-version', `v${c.version}`), h('span', `c-kind kind-${kind}`, kind), time);
    s.append(h('span', 'c-paths', c.diff ? c.diff.slice(0, 4).map((x) => x.path || '(root)').join('  ') : ''));
    const sum = h('span', 'c-counts');
    if (c.diff) {
      const n = counts(c.diff);
      sum.title = countText(n); sum.append(h('span', 'n-added', `+${n.added}`), h('span', 'n-changed', `~${n.changed}`), h('span', 'n-removed', `−${n.removed}`));
    }
    s.append(sum);
    const body = h('div', 'change-body');
    const p = h('div', 'c-patch');
    const [title, text] = {
      patch: () => ['Merge patch', pretty(c.patch)],
      // One operation a line, as text (textContent, like everything here).
      json_patch: () => [`JSON Patch: ${c.patch.length} operation${c.patch.length === 1 ? '' : 's'}`,
        c.patch.map((op) => JSON.stringify(op)).join('\n')],
      migration: () => ['Schema migration', 'The state was upgraded to a newer schema version (see the diff).'],
      replace: () => ['Replacement', 'The whole state was replaced (see the diff).'],
    }[kind]();
    p.append(h('h4', null, title), h('pre', 'patch', text));
    const df = h('div', 'c-diff');
    df.append(h('h4', null, 'Before → after'));
    if (!c.diff) df.append(h('p', 'muted', 'The state before this version is no longer in the change log.'));
    else if (!c.diff.length) df.append(h('p', 'muted', 'No difference: the write left the state as it was.'));
    else {
      const ul = h('ul', 'diff');
      for (const x of c.diff.slice(0, 300)) ul.append(diffRow(x));
      if (c.diff.length > 300) ul.append(h('li', 'muted', `… ${c.diff.length - 300} more paths`));
      df.append(ul);
    }
    body.append(p, df);
    d.append(s, body);
    return d;
  }
  function diffRow(x) {
    const li = h('li', `d-${x.op}`);
    li.dataset.diffPath = x.path;
    li.append(h('span', 'd-sign', { added: '+', removed: '−', changed: '~' }[x.op]), h('code', 'd-path', x.path || '(root)'));
    const vals = h('span', 'd-values');
    if (x.op !== 'added') vals.append(h('span', 'd-old', brief(x.old)));
    if (x.op === 'changed') vals.append(h('span', 'd-arrow', '→'));
    if (x.op !== 'removed') vals.append(h('span', 'd-new', brief(x.now)));
    li.append(vals);
    return li;
  }
  $('history').addEventListener('click', (ev) => { // on a click the user decides from now on
    const s = ev.target.closest('summary');
    if (s) delete s.parentElement.dataset.auto;
  });

  // State at a version: the slider follows the newest version until it is moved back.
  const [slider, number] = [$('at-version'), $('at-version-number')];
  function updateAtRange(me) {
    if (me.logOff) return;
    const max = Math.max(me.current, me.version);
    const min = me.first > 1 ? me.first - (me.base ? 1 : 0) : 0;
    Object.assign(slider, { min: String(min), max: String(max) });
    number.max = String(max);
    if (me.follow) showAt(me, max);
  }
  function showAt(me, v) {
    slider.value = String(v);
    number.value = String(v);
    const seq = ++me.atSeq;
    const done = (state) => {
      if (cur !== me || seq !== me.atSeq) return;
      atTree.set(state, null);
      const change = me.changes.find((c) => c.version === v);
      const n = me.state === undefined ? null : diff(state, me.state).length;
      const parts = [v === Math.max(me.version, me.current) ? `version ${v} (the current one)` : `version ${v}`];
      if (change) parts.push(`written ${stamp(change.at)}`);
      if (n !== null && v !== me.version) parts.push(`${n} path${n === 1 ? '' : 's'} differ from the current state`);
      $('at-version-label').textContent = parts.join(' · ');
    };
    if (v === me.version && me.state !== undefined) { done(me.state); return; }
    api(`${agentPath(me.id)}/state?version=${v}`).then((b) => done(b.state), (e) => {
      if (cur !== me || seq !== me.atSeq) return;
      if (e.code === 'change_log_off') { logOff(me); return; }
      atTree.notice(`Version ${v} cannot be shown: ${describe(e)}`, 'notice-error');
      $('at-version-label').textContent = '';
      reportError(`state of ${label(me.id)} at version ${v}`, e);
    });
  }
  let atTimer = 0;
  function pickVersion(v, now) {
    const me = cur;
    if (!me || me.logOff || !Number.isFinite(v)) return;
    const max = Math.max(me.current, me.version);
    v = Math.max(0, Math.min(max, Math.trunc(v)));
    me.follow = v === max;
    number.value = String(v);
    clearTimeout(atTimer);
    if (now) showAt(me, v);
    else atTimer = setTimeout(() => { if (cur === me) showAt(me, v); }, 80);
  }
  slider.addEventListener('input', () => pickVersion(Number(slider.value), false));
  number.addEventListener('change', () => pickVersion(Number(number.value), true));

  // ---- wiring -------------------------------------------------------------------------------
  let searchTimer = 0;
  $('search').addEventListener('input', () => {
    clearTimeout(searchTimer); // typing is debounced; loadAgents drops any older answer
    searchTimer = setTimeout(() => { list.prefix = $('search').value; loadAgents(false); }, 120);
  });
  $('more').addEventListener('click', () => loadAgents(true));
  $('refresh').addEventListener('click', () => loadAgents(false));
  $('agents').addEventListener('click', (ev) => {
    const b = ev.target.closest('.agent-item');
    if (b) location.hash = `agent=${encodeURIComponent(b.dataset.id)}`;
  });
  $('expand-all').addEventListener('click', () => stateTree.expandAll(true));
  $('collapse-all').addEventListener('click', () => stateTree.expandAll(false));
  $('status-clear').addEventListener('click', () => { errors.length = 0; renderStatus(); });
  window.addEventListener('hashchange', selectFromHash);
  setInterval(() => {
    const live = $('live');
    const on = cur !== null && cur.handle !== null && cur.handle.connected === true;
    live.className = `live ${on ? 'live-on' : 'live-off'}`;
    live.textContent = on ? 'live' : cur && cur.version ? 'reconnecting' : 'connecting';
    for (const e of document.querySelectorAll('.when[data-ms]')) e.textContent = ago(Number(e.dataset.ms));
  }, 500);

  renderStatus();
  if (!TOKEN) reportError('page', 'no access_token in the address: open the link the server printed');
  loadAgents(false);
  selectFromHash();
})();
