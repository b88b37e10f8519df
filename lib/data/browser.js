const INDEX = JSON.parse(document.getElementById("index").textContent);
const rowsOf = {};   // dataset -> its rows, once its script has run
const VQALAB = {loaded(name, rows) { rowsOf[name] = rows; }};
const state = {page: 0};

function params() {
  const p = new URLSearchParams(location.hash.slice(1));
  const f = {};
  for (const k of INDEX.filters) { if (p.get(k)) f[k] = p.get(k); }
  return f;
}

function load(names) {   // a dataset's rows are a script of their own: file:// allows <script src>, not fetch
  return Promise.all(names.filter(n => !(n in rowsOf)).map(n => new Promise((ok, fail) => {
    const s = document.createElement("script");
    s.src = INDEX.files[n]; s.onload = ok; s.onerror = () => fail(new Error("cannot load " + s.src));
    document.head.appendChild(s);
  })));
}

const LABELS = {significant: "changed and significant after correction"};   // a filter's longer name

function select(name, values, current) {
  const label = document.createElement("label");
  label.textContent = LABELS[name] || name;
  const sel = document.createElement("select");
  sel.id = "f-" + name;
  for (const v of ["", ...values]) {
    const o = document.createElement("option");
    o.value = v; o.textContent = v || "(all)";
    if (v === (current || "")) o.selected = true;
    sel.appendChild(o);
  }
  sel.onchange = () => {
    const f = params();
    if (sel.value) f[name] = sel.value; else delete f[name];
    state.page = 0;
    location.hash = new URLSearchParams(f).toString();
  };
  label.appendChild(sel);
  return label;
}

function matches(value, wanted) {   // a row's field is one value, or a list (disagree: every judge and criterion)
  return Array.isArray(value) ? value.includes(wanted) : String(value) === wanted;
}

function text(el, value) { el.textContent = value == null ? "" : value; return el; }

function cell(tr, value, cls) { const td = text(document.createElement("td"), value); if (cls) td.className = cls; tr.appendChild(td); return td; }

function scores(s) {
  return Object.entries(s || {}).map(([k, v]) => k + " " + (v == null ? "-" : (+v).toFixed(3))).join(" · ");
}

function sideBySide(r) {   // a changed answer: run A's and this run's, row by row
  const tr = document.createElement("tr");
  tr.className = "pair";
  const td = document.createElement("td");
  td.colSpan = 10;
  const why = text(document.createElement("p"), `${r.change} · first cause: ${r.cause} · because: ${r.because}`);
  why.className = "why " + r.change.replace(" ", "-");
  td.appendChild(why);
  const t = document.createElement("table");
  t.className = "side";
  const head = document.createElement("tr");
  for (const h of ["", `A · ${INDEX.comparison.A} · ${r.other.model} · ${r.other.style}`, `B · this run · ${r.model} · ${r.style}`]) {
    head.appendChild(text(document.createElement("th"), h));
  }
  t.appendChild(head);
  for (const [label, a, b] of [["prompt", r.other.prompt, r.prompt], ["raw reply", r.other.raw, r.raw],
                               ["read as", r.other.parsed, r.parsed], ["outcome", r.other.outcome, r.outcome],
                               ["scores", scores(r.other.scores), scores(r.scores)]]) {
    const row = document.createElement("tr");
    row.className = "side-" + label.replace(" ", "-");
    row.appendChild(text(document.createElement("th"), label));
    cell(row, a, "raw"); cell(row, b, "raw");
    t.appendChild(row);
  }
  td.appendChild(t);
  tr.appendChild(td);
  return tr;
}

function render(rows) {
  const body = document.querySelector("#items tbody");
  body.replaceChildren();
  const pages = Math.max(1, Math.ceil(rows.length / INDEX.page_rows));
  state.page = Math.min(state.page, pages - 1);
  const shown = rows.slice(state.page * INDEX.page_rows, (state.page + 1) * INDEX.page_rows);
  for (const r of shown) {
    const tr = document.createElement("tr");
    tr.className = "item " + r.outcome;
    tr.dataset.outcome = r.outcome;
    const img = cell(tr, "");
    for (const t of r.images) {
      if (!t) { img.appendChild(text(document.createElement("span"), "(image missing)")); continue; }
      const im = document.createElement("img"); im.src = t; im.loading = "lazy"; im.alt = r.item_id; img.appendChild(im);
    }
    cell(tr, r.dataset + " · " + r.task + "\n" + r.item_id + (r.flag && r.flag.length ? "\nflagged: " + r.flag.join(", ") : ""));
    cell(tr, r.model + " · " + r.style);
    cell(tr, r.subset);
    const q = cell(tr, r.question, "q");
    r.options.forEach((o, i) => q.appendChild(text(document.createElement("div"), String.fromCharCode(65 + i) + ". " + o)).className = "opt");
    cell(tr, r.reference, "raw");
    cell(tr, r.raw, "raw");
    cell(tr, r.parsed);
    cell(tr, r.outcome);
    cell(tr, r.rating == null ? "" : r.rating + ": " + r.rationale, "raw");
    body.appendChild(tr);
    if (r.other) {
      tr.dataset.change = r.change; tr.dataset.cause = r.cause;
      body.appendChild(sideBySide(r));
    }
  }
  const pager = document.getElementById("pager");
  pager.replaceChildren();
  pager.appendChild(text(document.createElement("span"), `${rows.length} answers · page ${state.page + 1} of ${pages} `));
  pager.querySelector("span").id = "count";
  for (const [label, to] of [["previous", state.page - 1], ["next", state.page + 1]]) {
    const b = text(document.createElement("button"), label);
    b.disabled = to < 0 || to >= pages;
    b.onclick = () => { state.page = to; show(); };
    pager.appendChild(b);
  }
}

function problem(message) {   // what the address asks that the run cannot show, said above the table (as text)
  let p = document.getElementById("problem");
  if (!p) {
    p = document.createElement("p");
    p.id = "problem"; p.className = "stale"; p.setAttribute("role", "alert");
    document.getElementById("filters").before(p);
  }
  p.hidden = !message;
  text(p, message);
}

async function show() {
  const f = params();
  const box = document.getElementById("filters");
  box.replaceChildren();
  for (const k of INDEX.filters) box.appendChild(select(k, INDEX.values[k], f[k]));
  const known = !f.dataset || Object.hasOwn(INDEX.files, f.dataset);
  const names = !f.dataset ? Object.keys(INDEX.files) : known ? [f.dataset] : [];
  try {
    await load(names);
    problem(known ? "" : `no dataset named ${f.dataset} in this run`);
  } catch (e) {
    problem(`${e.message}: the page's data/ folder is incomplete (write the browser again)`);
  }
  const rows = names.flatMap(n => rowsOf[n] || []).filter(r => INDEX.filters.every(k => !f[k] || matches(r[k], f[k])));
  render(rows);
}

window.addEventListener("hashchange", show);
show();
