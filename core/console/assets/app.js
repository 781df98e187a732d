// Queen console: a small single-page app over Queen's public HTTP API.
// Plain JavaScript, no dependencies, no build step. Pages are hash routes;
// every value shown comes from the API, every action is an API call.
'use strict';

// ---- DOM helpers (text is always set as text, never parsed as HTML)

const $ = (sel, root = document) => root.querySelector(sel);

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  add(el, kids);
  return el;
}

const SVG = 'http://www.w3.org/2000/svg';
function s(tag, attrs, ...kids) {
  const el = document.createElementNS(SVG, tag);
  setAttrs(el, attrs);
  add(el, kids);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.setAttribute('class', v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = !!v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
}

// patch fills el from build() unless what it shows (key) is unchanged, so a
// refresh does not replace buttons under the pointer.
function patch(el, key, build) {
  if (el.dataset.key === key) return;
  el.dataset.key = key;
  fill(el, build());
}

// fill replaces el's children (null and false are left out).
function fill(el, ...kids) {
  el.replaceChildren();
  add(el, kids);
}

function add(el, kids) {
  for (const k of kids.flat(Infinity)) {
    if (k == null || k === false) continue;
    el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
}

const enc = encodeURIComponent;

// ---- formatting

const nf = new Intl.NumberFormat('en-US');
const fmtInt = (n) => (n == null ? '—' : nf.format(n));
function fmtRate(r) {
  if (r == null) return '—';
  if (r === 0) return '0';
  return r < 10 ? r.toFixed(1) : nf.format(Math.round(r));
}
function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
function fmtDuration(ms) {
  const sec = Math.round(Math.abs(ms) / 1000);
  if (sec < 60) return `${sec}s`;
  if (sec < 3600) return `${Math.floor(sec / 60)}m ${sec % 60}s`;
  if (sec < 86400) return `${Math.floor(sec / 3600)}h ${Math.floor((sec % 3600) / 60)}m`;
  return `${Math.floor(sec / 86400)}d ${Math.floor((sec % 86400) / 3600)}h`;
}
function relTime(iso) {
  if (!iso) return '—';
  const ms = new Date(iso).getTime() - Date.now();
  return ms >= 0 ? `in ${fmtDuration(ms)}` : `${fmtDuration(ms)} ago`;
}
const short = (id) => (id ? String(id).slice(0, 8) : '—');
const QUEUE_MODE = '__QUEUE_MODE__';
const groupLabel = (g) => (g === QUEUE_MODE ? 'queue mode' : g);

// Pretty-printed JSON, coloured by token type.
function jsonView(value) {
  const pre = h('pre', { class: 'json' });
  const text = JSON.stringify(value, null, 2);
  if (text === undefined) {
    pre.textContent = String(value);
    return pre;
  }
  const re = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;
  let last = 0;
  for (let m; (m = re.exec(text));) {
    if (m.index > last) pre.append(text.slice(last, m.index));
    if (m[1]) {
      pre.append(h('span', { class: m[2] ? 'k' : 's' }, m[1]));
      if (m[2]) pre.append(m[2]);
    } else if (m[3]) pre.append(h('span', { class: 'b' }, m[3]));
    else pre.append(h('span', { class: 'n' }, m[4]));
    last = re.lastIndex;
  }
  pre.append(text.slice(last));
  return pre;
}

// ---- the API

class ApiError extends Error {
  constructor(status, message, what) {
    super(message);
    this.status = status;
    this.what = what;
  }
}

let meta = { mode: 'local' };

async function api(method, path, body) {
  const headers = { Accept: 'application/json', 'X-Queen-Console': '1' };
  const token = localStorage.getItem('queen.token');
  if (token && meta.mode === 'local') headers.Authorization = 'Bearer ' + token;
  const init = { method, headers };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const what = `${method} ${path.split('?')[0]}`;
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, `cannot reach the API (${e.message})`, what);
  }
  if (resp.status === 204) return null;
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!resp.ok) {
    const msg = (data && (data.error || data.message)) || text.trim().slice(0, 300) || resp.statusText;
    throw new ApiError(resp.status, msg, what);
  }
  if (data === null && text) throw new ApiError(resp.status, `the API answered with something other than JSON: ${text.slice(0, 200)}`, what);
  return data;
}

const get = (path) => api('GET', path);

// An error as a message on the page: never a blank page.
function errorBox(err, title) {
  const status = err && err.status ? `HTTP ${err.status}: ` : '';
  const box = h('div', { class: 'error-box', role: 'alert' },
    h('strong', {}, title || (err && err.what ? `${err.what} failed` : 'Something went wrong')),
    h('span', { class: 'error-message' }, status + ((err && err.message) || String(err))));
  if (err && err.status === 401) {
    box.append(h('div', { class: 'hint' }, meta.mode === 'local'
      ? 'This server requires a token: set one with the Token button (a JWT with the read-only role, admin for actions).'
      : 'The API refused the credentials queen console forwards: check -token, or your AWS login for SigV4.'));
  } else if (err && err.status === 403) {
    box.append(h('div', { class: 'hint' }, 'Your credentials lack the role this needs (read-only to look, admin to act).'));
  }
  return box;
}

// Every script error of this page, also those a later navigation hid
// (the browser tests read it).
const pageErrors = (window.queenConsoleErrors = []);

function showBanner(msg) {
  pageErrors.push(msg);
  const b = $('#banner');
  b.textContent = msg;
  b.hidden = false;
}

let flashTimer;
let flashAt = 0;
function flash(msg) {
  flashAt = Date.now();
  const f = $('#flash');
  f.textContent = msg;
  f.hidden = false;
  clearTimeout(flashTimer);
  flashTimer = setTimeout(() => { f.hidden = true; }, 5000);
}

window.addEventListener('error', (e) => showBanner(`Console error: ${e.message}`));
document.addEventListener('securitypolicyviolation', (e) => showBanner(`Console error: blocked by the content security policy: ${e.violatedDirective} ${e.blockedURI}`));
window.addEventListener('unhandledrejection', (e) => showBanner(`Console error: ${e.reason && e.reason.message ? e.reason.message : e.reason}`));

// ---- confirmation dialog

// confirmAction shows a dialog; on OK it runs action, which may throw: the
// error shows in the dialog, which stays open.
function confirmAction({ title, body, ok, danger, action }) {
  const modal = $('#modal');
  $('#modal-title').textContent = title;
  fill($('#modal-body'), ...[body].flat());
  const err = $('#modal-error');
  err.hidden = true;
  const okBtn = $('#modal-ok');
  okBtn.textContent = ok;
  okBtn.className = danger ? 'danger' : '';
  okBtn.disabled = false;
  modal.hidden = false;
  const close = () => { modal.hidden = true; okBtn.onclick = null; };
  $('#modal-cancel').onclick = close;
  okBtn.onclick = async () => {
    okBtn.disabled = true;
    try {
      await action();
      close();
    } catch (e) {
      err.textContent = (e.status ? `HTTP ${e.status}: ` : '') + e.message;
      err.hidden = false;
      okBtn.disabled = false;
    }
  };
  const first = $('#modal-body input');
  (first || okBtn).focus();
}

document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && !$('#modal').hidden) $('#modal-cancel').click();
});

// ---- sampling: the overview's numbers every 2 s, kept for 10 minutes, so
// charts show throughput and lag over the last minutes on any page.

const SAMPLE_MS = 2000;
const KEEP_MS = 10 * 60 * 1000;
const CHART_MS = 5 * 60 * 1000;
const samples = [];
let latest = null;
let sampleError = null;
const sampleListeners = new Set();

async function takeSample() {
  try {
    const [qs, ov] = await Promise.all([get('/api/v1/resources/queues'), get('/api/v1/resources/overview')]);
    const queues = {};
    for (const q of qs.queues) queues[q.name] = { messages: q.messages, depth: q.depth, partitions: q.partitions, dlq: 0, maxLag: 0, groups: {} };
    for (const q of ov.queues) {
      const e = queues[q.name] || (queues[q.name] = { messages: 0, depth: q.depth, partitions: 0, groups: {}, deleted: q.deleted });
      e.dlq = q.deadLetters;
      e.maxLag = q.maxLag;
      for (const g of q.groups) e.groups[g.group] = g.lag;
    }
    const sample = { t: Date.now(), queues };
    samples.push(sample);
    while (samples.length && samples[0].t < sample.t - KEEP_MS) samples.shift();
    latest = { queues: qs.queues, overview: ov, sample };
    sampleError = null;
  } catch (e) {
    sampleError = e;
  }
  for (const f of sampleListeners) f();
}

function startSampler() {
  // A hidden tab does not sample (each sample is two API calls); its charts
  // show the gap.
  const loop = async () => {
    if (!document.hidden || !latest) await takeSample();
    setTimeout(loop, SAMPLE_MS);
  };
  loop();
}

// rate of f(sample) per second between consecutive samples.
function rateSeries(f) {
  const pts = [];
  for (let i = 1; i < samples.length; i++) {
    const a = f(samples[i - 1]);
    const b = f(samples[i]);
    if (a == null || b == null) continue;
    pts.push([samples[i].t, Math.max(0, (b - a) / ((samples[i].t - samples[i - 1].t) / 1000))]);
  }
  return pts;
}

// recent rate of f over about the last 10 s.
function recentRate(f) {
  if (samples.length < 2) return null;
  const b = samples[samples.length - 1];
  let a = samples[samples.length - 2];
  for (let i = samples.length - 2; i >= 0 && b.t - samples[i].t <= 10000; i--) a = samples[i];
  const va = f(a);
  const vb = f(b);
  if (va == null || vb == null) return null;
  return Math.max(0, (vb - va) / ((b.t - a.t) / 1000));
}

const valueSeries = (f) => samples.map((x) => [x.t, f(x)]).filter((p) => p[1] != null);
const pushed = (name) => (x) => (x.queues[name] ? x.queues[name].messages : null);
const consumed = (name, group) => (x) => {
  const q = x.queues[name];
  return q && q.groups[group] != null ? q.messages - q.groups[group] : null;
};

// ---- charts: hand-drawn SVG line charts over the last minutes

const COLORS = ['#5b3cc4', '#1e9b6a', '#d9822b', '#c0392b', '#2a7ab9', '#8e44ad', '#16a085', '#7f8c8d'];

// niceStep is a round tick step (1, 2, 2.5 or 5 × 10ⁿ) of at least v.
function niceStep(v) {
  if (v <= 0) return 0.25;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

const tick = (v) => (v >= 1000 ? nf.format(v) : String(Number(v.toPrecision(3))));

// lineChart draws series ({name, points: [[t, v]…]}) over the time since the
// first sample: at least a minute, at most CHART_MS.
function lineChart(title, series, unit) {
  const W = 560, H = 190, L = 46, R = 12, T = 12, B = 24;
  const now = Date.now();
  const span = Math.min(CHART_MS, Math.max(60000, samples.length ? now - samples[0].t : 0));
  const x0 = now - span;
  const step = niceStep(Math.max(0, ...series.flatMap((sr) => sr.points.filter((p) => p[0] >= x0).map((p) => p[1]))) / 4);
  const ymax = step * 4;
  const x = (t) => L + ((t - x0) / span) * (W - L - R);
  const y = (v) => T + (1 - v / ymax) * (H - T - B);
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title });
  for (let i = 0; i <= 4; i++) {
    svg.append(s('line', { x1: L, x2: W - R, y1: y(step * i), y2: y(step * i), stroke: '#eceef2' }));
    svg.append(s('text', { x: L - 6, y: y(step * i) + 4, 'text-anchor': 'end' }, tick(step * i)));
  }
  const every = span <= 120000 ? 15000 : 60000;
  for (let ago = 0; ago <= span; ago += every) {
    const label = ago === 0 ? 'now' : every < 60000 ? `-${ago / 1000}s` : `-${ago / 60000}m`;
    svg.append(s('text', { x: x(now - ago), y: H - 6, 'text-anchor': ago === 0 ? 'end' : 'middle' }, label));
  }
  let drawn = 0;
  series.forEach((sr, i) => {
    const pts = sr.points.filter((p) => p[0] >= x0);
    if (pts.length < 2) return;
    drawn++;
    svg.append(s('polyline', { points: pts.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' '),
      fill: 'none', stroke: COLORS[i % COLORS.length], 'stroke-width': 2, 'stroke-linejoin': 'round' }));
  });
  if (!drawn) svg.append(s('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle' }, 'collecting samples…'));
  return h('div', { class: 'panel chart' },
    h('h3', {}, title, h('span', { class: 'muted' }, ` (${unit})`)), svg,
    h('div', { class: 'legend' }, series.map((sr, i) => h('span', {}, h('i', { 'data-color': i }), sr.name))));
}

// Legend swatches get their colour from the CSSOM (the page's CSP allows no
// inline style attributes).
function paintLegends(root) {
  for (const i of root.querySelectorAll('.legend i[data-color]')) i.style.background = COLORS[Number(i.dataset.color) % COLORS.length];
}

// ---- routing

let gen = 0; // bumped on every navigation: work of an old page stops

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const i = raw.indexOf('?');
  return { path: i < 0 ? raw : raw.slice(0, i), params: new URLSearchParams(i < 0 ? '' : raw.slice(i + 1)) };
}

const pages = [
  [/^\/?$/, overviewPage, 'overview'],
  [/^\/queues\/([^/]+)$/, queuePage, 'overview'],
  [/^\/queues\/([^/]+)\/configure$/, configurePage, 'overview'],
  [/^\/queues\/([^/]+)\/partitions\/([^/]+)$/, partitionPage, 'overview'],
  [/^\/dlq$/, dlqPage, 'dlq'],
  [/^\/subscriptions$/, subscriptionsPage, 'subscriptions'],
];

function render() {
  gen++;
  sampleListeners.clear();
  $('#banner').hidden = true;
  if (Date.now() - flashAt > 1000) $('#flash').hidden = true; // a message of the page left behind
  const { path, params } = parseHash();
  const main = $('#main');
  fill(main);
  for (const [re, page, nav] of pages) {
    const m = path.match(re);
    if (!m) continue;
    for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('active', a.dataset.nav === nav);
    let args;
    try {
      args = m.slice(1).map(decodeURIComponent);
    } catch {
      main.append(errorBox(new Error(`malformed address #${path}`), 'Page not found'));
      return;
    }
    Promise.resolve(page(main, ...args, params)).catch((e) => main.append(errorBox(e)));
    return;
  }
  main.append(errorBox(new Error(`there is no page at #${path}`), 'Page not found'), h('p', {}, h('a', { href: '#/' }, 'Go to the overview')));
}

// live calls refresh now and every ms while the page is shown; its errors
// show in slot, and clear once a refresh succeeds.
function live(ms, slot, refresh) {
  const g = gen;
  const tick = async () => {
    if (g !== gen) return;
    try {
      await refresh(() => g !== gen);
      if (g === gen) fill(slot);
    } catch (e) {
      if (g === gen) fill(slot, errorBox(e));
    }
    if (g === gen && ms) setTimeout(tick, ms);
  };
  return tick();
}

function navigate(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

const queueHref = (q) => `#/queues/${enc(q)}`;
const partitionHref = (q, p, from) => `#/queues/${enc(q)}/partitions/${enc(p)}${from != null ? `?from=${from}` : ''}`;

// ---- overview

function overviewPage(main) {
  const errSlot = h('div');
  const cards = h('div', { class: 'cards' });
  const table = h('div');
  const charts = h('div', { class: 'charts' });
  const nameInput = h('input', { name: 'queue', placeholder: 'queue name', required: true, id: 'new-queue' });
  const form = h('form', { class: 'inline', id: 'create-queue', onsubmit: async (e) => {
    e.preventDefault();
    const name = nameInput.value.trim();
    try {
      await api('POST', '/api/v1/configure', { queue: name, options: {} });
      flash(`Queue ${name} is configured.`);
      navigate(`${queueHref(name)}/configure`);
    } catch (err) {
      fill(formErr, errorBox(err, `Could not create queue ${name}`));
    }
  } }, h('label', { class: 'field' }, 'Create or configure a queue', nameInput), h('button', { type: 'submit' }, 'Configure'));
  const formErr = h('div');
  main.append(h('h1', {}, 'Overview'), h('p', { class: 'muted' }, 'Every queue, refreshed every 2 seconds.'),
    errSlot, cards, table, charts, h('h2', {}, 'New queue'), form, formErr);

  const draw = () => {
    if (sampleError) {
      fill(errSlot, errorBox(sampleError, 'Could not load the queues'));
      if (!latest) return;
    } else fill(errSlot);
    if (!latest) return;
    const { queues, overview } = latest;
    const totalRate = recentRate((x) => Object.values(x.queues).reduce((a, q) => a + q.messages, 0));
    fill(cards,
      card('Queues', fmtInt(overview.totals.queues)),
      card('Partitions', fmtInt(overview.totals.partitions)),
      card('Messages waiting', fmtInt(overview.totals.depth)),
      card('Pushed / s', fmtRate(totalRate)),
      card('Dead letters', h('a', { href: '#/dlq' }, fmtInt(overview.totals.deadLetters)), overview.totals.deadLetters > 0));
    const ovByName = Object.fromEntries(overview.queues.map((q) => [q.name, q]));
    const names = [...new Set([...queues.map((q) => q.name), ...overview.queues.map((q) => q.name)])].sort();
    if (!names.length) {
      fill(table, h('div', { class: 'empty' }, 'No queues yet. Push a message (a queue is created by its first push) or create one below.'));
    } else {
      const summary = Object.fromEntries(queues.map((q) => [q.name, q]));
      fill(table, h('table', { id: 'queues' },
        h('thead', {}, h('tr', {}, th('Queue'), th('Partitions', 1), th('Messages', 1), th('Depth', 1), th('Pushed / s', 1),
          th('Groups', 1), th('Worst lag', 1), th('Dead letters', 1))),
        h('tbody', {}, names.map((n) => {
          const q = summary[n];
          const o = ovByName[n] || { groups: [], maxLag: 0, deadLetters: 0 };
          if (!q) {
            return h('tr', { class: 'muted' }, h('td', {}, n, ' ', h('span', { class: 'badge' }, 'deleted')),
              h('td', { colspan: 6 }, 'queue deleted; its dead letters are kept'),
              h('td', { class: 'num' }, h('a', { href: `#/dlq?queue=${enc(n)}` }, fmtInt(o.deadLetters))));
          }
          return h('tr', { 'data-queue': n },
            h('td', {}, h('a', { href: queueHref(n) }, n)),
            h('td', { class: 'num' }, fmtInt(q.partitions)),
            h('td', { class: 'num' }, fmtInt(q.messages)),
            h('td', { class: 'num' }, fmtInt(q.depth)),
            h('td', { class: 'num' }, fmtRate(recentRate(pushed(n)))),
            h('td', { class: 'num' }, fmtInt(o.groups.length)),
            h('td', { class: 'num' + (o.maxLag > 1000 ? ' lag-high' : '') }, fmtInt(o.maxLag)),
            h('td', { class: 'num' }, o.deadLetters ? h('a', { href: `#/dlq?queue=${enc(n)}`, class: 'badge danger' }, fmtInt(o.deadLetters)) : '0'));
        }))));
    }
    const top = queues.slice().sort((a, b) => b.messages - a.messages).slice(0, 8).map((q) => q.name);
    fill(charts,
      lineChart('Throughput: messages pushed per second', top.map((n) => ({ name: n, points: rateSeries(pushed(n)) })), 'msg/s'),
      lineChart('Worst consumer-group lag', top.map((n) => ({ name: n, points: valueSeries((x) => (x.queues[n] ? x.queues[n].maxLag : null)) })), 'messages'));
    paintLegends(charts);
  };
  sampleListeners.add(draw);
  draw();
}

function card(label, value, alert) {
  return h('div', { class: 'card' + (alert ? ' alert' : '') }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value));
}
const th = (t, num) => h('th', { class: num ? 'num' : null }, t);

// ---- queue page

async function queuePage(main, name) {
  const errSlot = h('div');
  const head = h('div');
  const charts = h('div', { class: 'charts' });
  const groups = h('div');
  const parts = h('div');
  const filter = h('input', { placeholder: 'filter partitions', id: 'partition-filter', oninput: () => redraw() });
  const content = h('div', { hidden: true }, charts, h('h2', {}, 'Consumer groups'), groups,
    h('div', { class: 'title-row' }, h('h2', {}, 'Partitions'), h('span', { class: 'actions' }, filter)), parts);
  main.append(h('div', { class: 'crumbs' }, h('a', { href: '#/' }, 'Overview'), ' / ', name), errSlot, head, content);

  let detail = null;
  let cursors = {}; // group → partition name → cursor
  const redraw = () => {
    if (!detail) return;
    content.hidden = false;
    drawHead();
    drawGroups();
    drawPartitions();
  };

  const drawHead = () => {
    const o = detail.options;
    const dlq = latest && latest.sample.queues[name] ? latest.sample.queues[name].dlq : null;
    const rate = fmtRate(recentRate(pushed(name)));
    patch(head, JSON.stringify([o, dlq, rate, detail.depth, detail.partitions.length, detail.partitions.map((p) => p.lastOffset)]), () => [
      h('div', { class: 'title-row' }, h('h1', {}, name),
        h('span', { class: 'actions' },
          h('a', { href: `#/dlq?queue=${enc(name)}` }, h('button', { type: 'button', class: 'ghost' }, 'Dead letters')),
          h('a', { href: `${queueHref(name)}/configure` }, h('button', { type: 'button', id: 'configure' }, 'Configure')))),
      h('div', { class: 'cards' },
        card('Depth', fmtInt(detail.depth)),
        card('Partitions', fmtInt(detail.partitions.length)),
        card('Messages', fmtInt(detail.partitions.reduce((a, p) => a + p.lastOffset + 1, 0))),
        card('Pushed / s', rate),
        card('Dead letters', dlq == null ? '—' : h('a', { href: `#/dlq?queue=${enc(name)}` }, fmtInt(dlq)), dlq > 0)),
      h('div', { class: 'options' },
        opt('leaseTime', o.leaseTime, 's'), opt('retryLimit', o.retryLimit), opt('retryDelay', o.retryDelay, 'ms'),
        opt('dedupWindow', o.dedupWindowSeconds, 's'), opt('delayedProcessing', o.delayedProcessing, 's'),
        opt('windowBuffer', o.windowBuffer, 's'), opt('maxSize', o.maxSize || 'unlimited'),
        opt('retention', o.retentionSeconds || 'off', o.retentionSeconds ? 's' : ''),
        opt('completedRetention', o.completedRetentionSeconds || 'off', o.completedRetentionSeconds ? 's' : ''),
        opt('encryption', o.encryptionEnabled ? 'on' : 'off'))]);
    const gs = detail.groups.map((g) => g.group);
    fill(charts,
      lineChart('Throughput', [{ name: 'pushed', points: rateSeries(pushed(name)) },
        ...gs.map((g) => ({ name: `${groupLabel(g)} consumed`, points: rateSeries(consumed(name, g)) }))], 'msg/s'),
      lineChart('Lag by consumer group', gs.map((g) => ({ name: groupLabel(g),
        points: valueSeries((x) => (x.queues[name] && x.queues[name].groups[g] != null ? x.queues[name].groups[g] : null)) })), 'messages'));
    paintLegends(charts);
  };

  const drawGroups = () => patch(groups, JSON.stringify(detail.groups), () => {
    if (!detail.groups.length) return h('div', { class: 'empty' }, 'No consumer group has read this queue yet.');
    return h('table', { id: 'groups' },
      h('thead', {}, h('tr', {}, th('Group'), th('Subscription'), th('Lag', 1), th('Partitions read', 1), th('Active leases', 1), h('th', { class: 'num' }, 'Actions'))),
      h('tbody', {}, detail.groups.map((g) => h('tr', { 'data-group': g.group },
        h('td', {}, groupLabel(g.group), g.group === QUEUE_MODE ? h('span', { class: 'muted mono' }, ` ${QUEUE_MODE}`) : null),
        h('td', {}, g.subscriptionMode, g.subscriptionFrom ? ` from ${fmtTime(g.subscriptionFrom)}` : ''),
        h('td', { class: 'num' }, fmtInt(g.lag)),
        h('td', { class: 'num' }, fmtInt(g.partitions)),
        h('td', { class: 'num' }, fmtInt(g.activeLeases)),
        h('td', { class: 'actions' },
          h('button', { type: 'button', class: 'ghost small', 'data-action': 'seek-beginning', onclick: () => seek(g.group, 'beginning') }, 'Seek to beginning'),
          h('button', { type: 'button', class: 'ghost small', 'data-action': 'seek-end', onclick: () => seek(g.group, 'end') }, 'Seek to end'),
          h('button', { type: 'button', class: 'ghost small', 'data-action': 'seek-time', onclick: () => seek(g.group, 'time') }, 'Seek to time…'),
          h('button', { type: 'button', class: 'ghost danger small', 'data-action': 'delete-group', onclick: () => deleteGroup(g.group) }, 'Delete'))))));
  });

  const drawPartitions = () => {
    const f = filter.value.trim().toLowerCase();
    const list = detail.partitions.filter((p) => !f || p.name.toLowerCase().includes(f));
    const shown = list.slice(0, 200);
    const gs = detail.groups.map((g) => g.group);
    const now = Date.now();
    const rows = [];
    for (const p of shown) {
      const span = Math.max(1, gs.length);
      const first = [
        h('td', { rowspan: span }, h('a', { href: partitionHref(name, p.name) }, p.name)),
        h('td', { rowspan: span, class: 'num' }, fmtInt(p.lastOffset)),
        h('td', { rowspan: span }, p.lastPushedAt ? relTime(p.lastPushedAt) : '—'),
      ];
      if (!gs.length) {
        rows.push(h('tr', { class: 'group-start', 'data-partition': p.name }, first, h('td', { colspan: 6, class: 'muted' }, 'no consumer group yet')));
        continue;
      }
      gs.forEach((g, i) => {
        const c = (cursors[g] || {})[p.name];
        const leased = c && c.leaseId && new Date(c.leaseExpiresAt).getTime() > now;
        const cells = [
          h('td', {}, groupLabel(g)),
          h('td', { class: 'num cursor' }, c ? fmtInt(c.committed) : '—'),
          h('td', { class: 'num' + (c && c.lag > 1000 ? ' lag-high' : '') }, c ? fmtInt(c.lag) : '—'),
          h('td', {}, leased ? h('span', { title: c.leaseId }, h('span', { class: 'badge processing' }, 'leased'), ' ',
            c.worker ? c.worker : short(c.leaseId), c.batchEnd != null ? ` to ${c.batchEnd}` : '') : h('span', { class: 'muted' }, '—')),
          h('td', {}, leased ? relTime(c.leaseExpiresAt) : '—'),
          h('td', { class: 'num' }, c ? (c.attempts ? h('span', { class: 'badge pending' }, c.attempts) : '0') : '—'),
        ];
        rows.push(h('tr', { class: i === 0 ? 'group-start' : null, 'data-partition': p.name, 'data-group': g }, i === 0 ? first : null, cells));
      });
    }
    fill(parts,
      h('table', { id: 'partitions' },
        h('thead', {}, h('tr', {}, th('Partition'), th('Last offset', 1), th('Last push'), th('Group'), th('Cursor', 1), th('Lag', 1),
          th('Lease'), th('Lease expires'), th('Head attempts', 1))),
        h('tbody', {}, rows)),
      list.length > shown.length ? h('p', { class: 'muted' }, `Showing ${shown.length} of ${list.length} partitions; filter to narrow.`) : null,
      !detail.partitions.length ? h('div', { class: 'empty' }, 'No partitions: nothing was pushed yet.') : null);
  };

  const refresh = async (stale) => {
    const d = await get(`/api/v1/resources/queues/${enc(name)}`);
    const byGroup = {};
    await Promise.all(d.groups.map(async (g) => {
      // A group deleted meanwhile has no cursors left.
      const gd = await get(`/api/v1/consumer-groups/${enc(g.group)}`).catch((e) => {
        if (e.status === 404) return { queues: [] };
        throw e;
      });
      const onQueue = (gd.queues || []).find((q) => q.queue === name);
      byGroup[g.group] = Object.fromEntries(((onQueue && onQueue.cursors) || []).map((c) => [c.partition, c]));
    }));
    if (stale()) return;
    detail = d;
    cursors = byGroup;
    redraw();
  };

  const seek = (group, where) => {
    const what = { beginning: 'to the beginning', end: 'to the end', time: 'to a point in time' }[where];
    const input = h('input', { type: 'datetime-local', step: 1, id: 'seek-time' });
    const body = [
      h('p', {}, `Move every cursor of group ${groupLabel(group)} on ${name} ${what}.`),
      where === 'beginning' ? h('p', {}, 'Every stored message will be delivered to this group again.') : null,
      where === 'end' ? h('p', {}, 'Every message not yet consumed by this group is skipped.') : null,
      where === 'time' ? [h('p', {}, 'The first message created at or after this time is the next one delivered:'), input] : null,
      h('p', { class: 'muted' }, 'Leases of this group on this queue end and head attempt counts are reset.'),
    ];
    confirmAction({ title: `Seek ${groupLabel(group)}`, body, ok: 'Seek', action: async () => {
      let target;
      if (where === 'beginning') target = { toBeginning: true };
      else if (where === 'end') target = { toEnd: true };
      else {
        if (!input.value) throw new Error('choose a date and time');
        target = { timestamp: new Date(input.value).toISOString() };
      }
      const res = await api('POST', `/api/v1/consumer-groups/${enc(group)}/queues/${enc(name)}/seek`, target);
      flash(`Group ${groupLabel(group)} moved ${what} on ${res.partitions.length} partition(s).`);
      await refresh(() => false);
    } });
  };

  const deleteGroup = (group) => confirmAction({
    title: `Delete group ${groupLabel(group)} on ${name}`,
    body: [h('p', {}, `The cursors and the subscription of ${groupLabel(group)} on ${name} are forgotten.`),
      h('p', {}, 'A later pop of this group starts it anew, from where its subscription mode says.')],
    ok: 'Delete', danger: true, action: async () => {
      await api('DELETE', `/api/v1/consumer-groups/${enc(group)}/queues/${enc(name)}`);
      flash(`Group ${groupLabel(group)} deleted on ${name}.`);
      await refresh(() => false);
    } });

  sampleListeners.add(() => { if (detail) drawHead(); });
  await live(SAMPLE_MS, errSlot, refresh);
}

const opt = (k, v, unit) => h('span', {}, `${k} `, h('b', {}, v, unit && v !== 'off' ? ` ${unit}` : ''));

// ---- configure

const OPTIONS = [
  ['leaseTime', 'Lease time (s)', 'How long a popped batch is leased before it counts as failed and comes back.'],
  ['retryLimit', 'Retry limit', 'Failed attempts a message may have; the next failure dead-letters it.'],
  ['retryDelay', 'Retry delay (ms)', 'After a failure, how long the partition waits before that group gets it again.'],
  ['dedupWindowSeconds', 'Dedup window (s)', 'A transactionId seen in the partition within this window is a duplicate (0: off).'],
  ['delayedProcessing', 'Delayed processing (s)', 'Messages younger than this are not delivered yet.'],
  ['windowBuffer', 'Window buffer (s)', 'A partition is delivered only once its newest message is at least this old.'],
  ['maxSize', 'Max size (messages)', 'Pushes beyond this many unconsumed messages are refused with 429 (0: unlimited).'],
  ['retentionSeconds', 'Retention (s)', 'Log segments older than this are deleted, consumed or not (0: off).'],
  ['completedRetentionSeconds', 'Completed retention (s)', 'Segments older than this that every group has consumed are deleted (0: off).'],
];

async function configurePage(main, name) {
  const errSlot = h('div');
  main.append(h('div', { class: 'crumbs' }, h('a', { href: '#/' }, 'Overview'), ' / ', h('a', { href: queueHref(name) }, name), ' / configure'),
    h('h1', {}, `Configure ${name}`),
    h('p', { class: 'muted' }, 'A partial update: only the options you change are sent; the others keep their value.'), errSlot);
  let q;
  try {
    q = await get(`/api/v1/resources/queues/${enc(name)}`);
  } catch (e) {
    if (e.status !== 404) throw e;
    fill(errSlot, errorBox(e, `Queue ${name} does not exist yet`), h('p', {}, 'Saving creates it with the options below.'));
    q = { options: { leaseTime: 300, retryLimit: 3, retryDelay: 0, dedupWindowSeconds: 3600, delayedProcessing: 0, windowBuffer: 0,
      maxSize: 0, retentionSeconds: 0, completedRetentionSeconds: 0, encryptionEnabled: false } };
  }
  const inputs = {};
  const grid = h('div', { class: 'config-grid' });
  for (const [key, label, help] of OPTIONS) {
    // No min or max here: the API validates, and its message is shown.
    const input = h('input', { type: 'number', name: key, id: `opt-${key}`, value: q.options[key] });
    const row = h('div', {}, input);
    input.addEventListener('input', () => row.classList.toggle('changed', input.value !== String(q.options[key])));
    inputs[key] = input;
    grid.append(h('label', { for: `opt-${key}` }, label), row, h('div', { class: 'help' }, help));
  }
  const enc_ = h('input', { type: 'checkbox', id: 'opt-encryptionEnabled', checked: q.options.encryptionEnabled });
  grid.append(h('label', { for: 'opt-encryptionEnabled' }, 'Encryption at rest'), h('div', {}, enc_),
    h('div', { class: 'help' }, 'Payloads are sealed with AES-256-GCM by the server before they are stored.'));
  const result = h('div');
  const form = h('form', { id: 'configure-form', onsubmit: async (e) => {
    e.preventDefault();
    const options = {};
    for (const [key] of OPTIONS) {
      const v = inputs[key].value.trim();
      if (v !== String(q.options[key])) options[key] = v === '' ? NaN : Number(v);
    }
    if (enc_.checked !== !!q.options.encryptionEnabled) options.encryptionEnabled = enc_.checked;
    const bad = Object.entries(options).filter(([, v]) => typeof v === 'number' && !Number.isInteger(v));
    if (bad.length) {
      fill(result, errorBox(new Error(`${bad.map(([k]) => k).join(', ')}: a whole number is required`), 'Not saved'));
      return;
    }
    try {
      const res = await api('POST', '/api/v1/configure', { queue: name, options });
      q = { options: res.options };
      for (const [key] of OPTIONS) {
        inputs[key].value = res.options[key];
        inputs[key].parentElement.classList.remove('changed');
      }
      fill(result, h('div', { class: 'panel', id: 'configure-result' }, h('h3', {}, 'Saved. Effective options:'), jsonView(res.options)));
      flash(`Queue ${name} configured.`);
    } catch (err) {
      fill(result, errorBox(err, 'Not saved'));
    }
  } }, grid, h('div', { class: 'toolbar' }, h('button', { type: 'submit' }, 'Save'), h('a', { href: queueHref(name) }, 'Back to the queue')));
  main.append(h('div', { class: 'panel' }, form), result);
}

// ---- partition browser

async function partitionPage(main, name, partition, params) {
  const limit = Math.min(Math.max(Number(params.get('limit')) || 20, 1), 100);
  const errSlot = h('div');
  main.append(h('div', { class: 'crumbs' }, h('a', { href: '#/' }, 'Overview'), ' / ', h('a', { href: queueHref(name) }, name), ' / ', partition),
    h('h1', {}, `Partition ${partition}`), errSlot);
  const q = await get(`/api/v1/resources/queues/${enc(name)}`);
  const p = q.partitions.find((x) => x.name === partition);
  if (!p) throw new ApiError(404, `queue ${name} has no partition ${partition}`, 'Partition lookup');
  const last = p.lastOffset;
  let from = params.has('from') ? Number(params.get('from')) : Math.max(0, last - limit + 1);
  if (!Number.isInteger(from) || from < 0) from = 0;
  const go = (n) => navigate(partitionHref(name, partition, Math.max(0, Math.min(n, Math.max(0, last)))));
  const offsetInput = h('input', { type: 'number', min: 0, id: 'from-offset', value: from });
  main.append(
    h('p', { class: 'muted' }, `Offsets 0 to ${fmtInt(last)} were written; retention may have removed the oldest. Partition id `, h('code', {}, p.id)),
    h('form', { class: 'pager', onsubmit: (e) => { e.preventDefault(); go(Number(offsetInput.value)); } },
      h('button', { type: 'button', class: 'ghost', onclick: () => go(0) }, '« First'),
      h('button', { type: 'button', class: 'ghost', onclick: () => go(from - limit), disabled: from === 0 }, '‹ Previous'),
      h('label', { class: 'field' }, 'From offset', offsetInput), h('button', { type: 'submit' }, 'Go'),
      h('button', { type: 'button', class: 'ghost', onclick: () => go(from + limit), disabled: from + limit > last }, 'Next ›'),
      h('button', { type: 'button', class: 'ghost', onclick: () => go(last - limit + 1) }, 'Last »')));
  const list = h('div', { class: 'messages', id: 'messages' });
  main.append(list);
  const msgs = (await get(`/api/v1/messages?queue=${enc(name)}&partition=${enc(partition)}&fromOffset=${from}&limit=${limit}`)).messages;
  if (!msgs.length) {
    list.append(h('div', { class: 'empty' }, last < 0 ? 'This partition is empty.' : `No stored message from offset ${from}.`));
    return;
  }
  for (const m of msgs) {
    list.append(h('article', { class: 'message', 'data-offset': m.offset },
      h('header', {}, h('span', { class: 'offset' }, `#${m.offset}`), h('span', { class: `badge ${m.status}` }, m.status.replace('_', ' ')),
        h('span', { class: 'meta' }, `consumed by ${m.busStatus.consumedBy} of ${m.busStatus.totalGroups} group(s)`),
        h('span', { class: 'meta' }, fmtTime(m.createdAt)),
        h('span', { class: 'meta mono', title: 'transactionId' }, m.transactionId),
        m.traceId ? h('span', { class: 'meta' }, `trace ${m.traceId}`) : null,
        m.producerSub ? h('span', { class: 'meta' }, `by ${m.producerSub}`) : null),
      jsonView(m.data)));
  }
}

// ---- dead letters

async function dlqPage(main, params) {
  const pageSize = 25;
  const f = Object.fromEntries(['queue', 'consumerGroup', 'partition', 'from', 'to'].map((k) => [k, params.get(k) || '']));
  const offset = Math.max(0, Number(params.get('offset')) || 0);
  const queueNames = latest ? latest.overview.queues.map((q) => q.name) : [];
  const field = (k, label, type) => h('label', { class: 'field' }, label,
    h('input', { name: k, id: `filter-${k}`, type: type || 'text', value: type === 'datetime-local' ? toLocalInput(f[k]) : f[k],
      list: k === 'queue' ? 'queue-names' : null, step: type ? 1 : null }));
  const form = h('form', { class: 'inline', id: 'dlq-filters', onsubmit: (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const el of form.querySelectorAll('input[name]')) {
      let v = el.value.trim();
      if (!v) continue;
      if (el.type === 'datetime-local') v = new Date(v).toISOString();
      p.set(el.name, v);
    }
    navigate(`#/dlq${p.toString() ? '?' + p : ''}`);
  } }, field('queue', 'Queue'), field('consumerGroup', 'Consumer group'), field('partition', 'Partition'),
  field('from', 'Failed from', 'datetime-local'), field('to', 'Failed until', 'datetime-local'),
  h('button', { type: 'submit' }, 'Filter'), h('a', { href: '#/dlq' }, 'Clear'),
  h('datalist', { id: 'queue-names' }, queueNames.map((n) => h('option', { value: n }))));
  const errSlot = h('div');
  const out = h('div');
  main.append(h('h1', {}, 'Dead letters'),
    h('p', { class: 'muted' }, 'Messages that failed for good, with the error their consumer reported. Retry pushes the stored payload again to its queue and partition; delete drops it. One message at a time: there is no bulk requeue.'),
    form, errSlot, out);

  const load = async () => {
    const q = new URLSearchParams({ limit: pageSize, offset });
    for (const [k, v] of Object.entries(f)) if (v) q.set(k, v);
    const page = await get(`/api/v1/dlq?${q}`);
    drawPage(page);
  };
  const drawPage = (page) => {
    if (!page.messages.length) {
      fill(out, h('div', { class: 'empty', id: 'dlq-empty' }, page.total ? 'No dead letters on this page.' : 'No dead letters match.'));
      return;
    }
    const rows = [];
    for (const d of page.messages) {
      const detail = h('tr', { class: 'detail', hidden: true }, h('td', { colspan: 8 },
        h('dl', { class: 'kv' },
          h('dt', {}, 'transactionId'), h('dd', {}, d.transactionId),
          h('dt', {}, 'messageId'), h('dd', {}, d.messageId),
          h('dt', {}, 'partitionId'), h('dd', {}, d.partitionId),
          h('dt', {}, 'traceId'), h('dd', {}, d.traceId || '—'),
          h('dt', {}, 'created'), h('dd', {}, fmtTime(d.createdAt)),
          h('dt', {}, 'error'), h('dd', { class: 'error-text' }, d.errorMessage || '—')),
        h('h3', {}, 'Payload'), jsonView(d.data)));
      const toggle = h('button', { type: 'button', class: 'ghost small', 'data-action': 'show', onclick: () => {
        detail.hidden = !detail.hidden;
        toggle.textContent = detail.hidden ? 'Show' : 'Hide';
      } }, 'Show');
      rows.push(h('tr', { 'data-transaction': d.transactionId, 'data-group': d.consumerGroup },
        h('td', {}, fmtTime(d.failedAt)),
        h('td', {}, h('a', { href: queueHref(d.queue) }, d.queue)),
        h('td', {}, h('a', { href: partitionHref(d.queue, d.partition, d.offset) }, d.partition)),
        h('td', { class: 'num' }, fmtInt(d.offset)),
        h('td', {}, groupLabel(d.consumerGroup)),
        h('td', { class: 'num' }, fmtInt(d.retryCount)),
        h('td', { class: 'error-text' }, (d.errorMessage || '—').slice(0, 80)),
        h('td', { class: 'actions' }, toggle,
          h('button', { type: 'button', class: 'small', 'data-action': 'retry', onclick: () => retry(d) }, 'Retry'),
          h('button', { type: 'button', class: 'ghost danger small', 'data-action': 'delete', onclick: () => del(d) }, 'Delete'))), detail);
    }
    const pageHref = (o) => {
      const p = new URLSearchParams(params);
      p.set('offset', o);
      return `#/dlq?${p}`;
    };
    fill(out,
      h('table', { id: 'dlq' }, h('thead', {}, h('tr', {}, th('Failed'), th('Queue'), th('Partition'), th('Offset', 1), th('Group'),
        th('Attempts', 1), th('Error'), h('th', { class: 'num' }, 'Actions'))), h('tbody', {}, rows)),
      h('div', { class: 'pager' }, h('span', { class: 'muted', id: 'dlq-total' }, `${fmtInt(offset + 1)}–${fmtInt(offset + page.messages.length)} of ${fmtInt(page.total)}`),
        offset > 0 ? h('a', { href: pageHref(Math.max(0, offset - pageSize)) }, '‹ Previous') : null,
        offset + page.messages.length < page.total ? h('a', { href: pageHref(offset + pageSize) }, 'Next ›') : null));
  };
  const addr = (d) => `/api/v1/messages/${enc(d.partitionId)}/${enc(d.transactionId)}`;
  const where = (d) => `${d.queue} / ${d.partition} at offset ${d.offset}`;
  const retry = (d) => confirmAction({
    title: 'Retry dead letter',
    body: [h('p', {}, `Push the stored payload of ${where(d)} again, to the same queue and partition, under a fresh transactionId.`),
      h('p', {}, `The dead letter of group ${groupLabel(d.consumerGroup)} is removed in the same transaction.`)],
    ok: 'Retry', action: async () => {
      const res = await api('POST', `${addr(d)}/retry?consumerGroup=${enc(d.consumerGroup)}`);
      flash(`Re-pushed to ${res.message.queueName} as offset ${res.message.offset}.`);
      await live(0, errSlot, load);
    } });
  const del = (d) => confirmAction({
    title: 'Delete dead letter',
    body: h('p', {}, `Drop the dead letter of ${where(d)} for group ${groupLabel(d.consumerGroup)}. Its payload is gone for good.`),
    ok: 'Delete', danger: true, action: async () => {
      await api('DELETE', `${addr(d)}?consumerGroup=${enc(d.consumerGroup)}`);
      flash(`Dead letter of ${where(d)} deleted.`);
      await live(0, errSlot, load);
    } });
  await live(0, errSlot, load);
}

function toLocalInput(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (isNaN(d)) return '';
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// ---- subscriptions

async function subscriptionsPage(main) {
  const errSlot = h('div');
  const out = h('div');
  main.append(h('h1', {}, 'Subscriptions'),
    h('p', { class: 'muted' }, 'Consumer groups delivered to a Lambda function or an HTTP endpoint by Queen itself, in ordered batches of one partition, acked by the target\'s answer. Pause stops new deliveries; a batch in flight finishes.'),
    errSlot, out);
  const before = new Map(); // key → [time, delivered] of the previous refresh
  const load = async () => {
    const [subs, groups] = await Promise.all([get('/api/v1/subscriptions'), get('/api/v1/consumer-groups')]);
    const lag = new Map();
    for (const g of groups.consumerGroups) for (const q of g.queues || []) lag.set(`${q.queue}\u0000${g.group}`, q);
    if (!subs.subscriptions.length) {
      fill(out, h('div', { class: 'empty', id: 'subscriptions-empty' }, 'No subscriptions. POST /api/v1/subscriptions creates one (docs/subscriptions.md).'));
      return;
    }
    const now = Date.now();
    const rows = subs.subscriptions.map((sub) => {
      const key = `${sub.queue}\u0000${sub.consumerGroup}`;
      const prev = before.get(key);
      const rate = prev && now > prev[0] ? ((sub.delivered - prev[1]) * 1000) / (now - prev[0]) : null;
      before.set(key, [now, sub.delivered]);
      const onQueue = lag.get(key);
      const target = sub.target.function ? `λ ${sub.target.function}` : sub.target.url;
      return h('tr', { 'data-queue': sub.queue, 'data-group': sub.consumerGroup },
        h('td', {}, h('a', { href: queueHref(sub.queue) }, sub.queue)),
        h('td', {}, groupLabel(sub.consumerGroup)),
        h('td', { class: 'target' }, target),
        h('td', { 'data-state': sub.enabled ? 'active' : 'paused' }, sub.enabled ? 'active' : 'paused'),
        h('td', { class: 'num' }, fmtInt(onQueue ? onQueue.lag : 0)),
        h('td', { class: 'num' }, rate == null ? '—' : fmtRate(rate)),
        h('td', { class: 'num' }, fmtInt(sub.delivered)),
        h('td', {}, sub.lastDeliveryAt ? relTime(sub.lastDeliveryAt) : '—'),
        h('td', { class: 'error-text', title: sub.lastErrorAt ? fmtTime(sub.lastErrorAt) : null },
          sub.lastError ? `${sub.lastError.slice(0, 80)} (${relTime(sub.lastErrorAt)})` : '—'),
        h('td', { class: 'actions' }, h('button', { type: 'button', class: 'small', 'data-action': sub.enabled ? 'pause' : 'resume',
          onclick: () => toggle(sub) }, sub.enabled ? 'Pause' : 'Resume')));
    });
    fill(out, h('table', { id: 'subscriptions' }, h('thead', {}, h('tr', {}, th('Queue'), th('Group'), th('Target'), th('State'),
      th('Lag', 1), th('Delivered/s', 1), th('Delivered', 1), th('Last delivery'), th('Last error'), h('th', { class: 'num' }, 'Actions'))),
    h('tbody', {}, rows)));
  };
  const toggle = (sub) => confirmAction({
    title: sub.enabled ? 'Pause subscription' : 'Resume subscription',
    body: h('p', {}, sub.enabled
      ? `Stop delivering ${sub.queue} to group ${groupLabel(sub.consumerGroup)}'s target. Messages wait; the group's cursors stay.`
      : `Deliver ${sub.queue} to group ${groupLabel(sub.consumerGroup)}'s target again, from where it stopped.`),
    ok: sub.enabled ? 'Pause' : 'Resume', action: async () => {
      const { queue, consumerGroup, target, batchSize, maxBatchBytes, batchWindowMs, maxConcurrency } = sub;
      await api('POST', '/api/v1/subscriptions', { queue, consumerGroup, target, batchSize, maxBatchBytes, batchWindowMs, maxConcurrency, enabled: !sub.enabled });
      flash(`Subscription of ${groupLabel(consumerGroup)} on ${queue} ${sub.enabled ? 'paused' : 'resumed'}.`);
      await live(0, errSlot, load);
    } });
  await live(SAMPLE_MS, errSlot, load);
}

// ---- token (for `queen serve` with JWT authentication)

function tokenDialog() {
  const input = h('input', { type: 'password', id: 'token-input', placeholder: 'eyJ…', value: localStorage.getItem('queen.token') || '' });
  confirmAction({
    title: 'API token',
    body: meta.mode === 'proxy'
      ? h('p', {}, `queen console authenticates the calls itself (${meta.auth}); no token is needed here.`)
      : [h('p', {}, 'For a server with JWT authentication: a bearer token with the read-only role (admin for actions). Kept in this browser only; leave empty to clear.'), input],
    ok: 'Save', action: async () => {
      if (input.value.trim()) localStorage.setItem('queen.token', input.value.trim());
      else localStorage.removeItem('queen.token');
      render();
    } });
}

// ---- start

async function start() {
  try {
    meta = await (await fetch('meta.json')).json();
  } catch {
    meta = { mode: 'local' };
  }
  $('#api-info').textContent = meta.mode === 'proxy' ? `API ${meta.api} (${meta.auth})` : location.host;
  $('#token-button').addEventListener('click', tokenDialog);
  window.addEventListener('hashchange', render);
  startSampler();
  render();
}

start();
