// dom.js builds elements safely: text is always set as text (text nodes, textContent), never parsed as
// HTML. Nothing in the app assigns markup to an element (web_test.go checks every module for such sinks).

/**
 * h creates an element. attrs: "class", "for", aria-* and data-* become attributes; "on<event>" adds a
 * listener; "hidden", "disabled", "checked", "value", "type", "href"… are set as properties. Children are
 * nodes, strings (inserted as text), numbers, arrays, or null/false (skipped).
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v);
    } else if (k === "class") {
      el.className = v;
    } else if (k === "href") {
      el.setAttribute("href", safeHref(v));
    } else if (k === "for" || k.startsWith("aria-") || k.startsWith("data-") || k === "role" || k === "autocomplete" || k === "inputmode") {
      el.setAttribute(k, v === true ? "" : String(v));
    } else {
      el[k] = v;
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

/** safeHref allows only the app's own hash routes and same-origin relative links. */
export function safeHref(v) {
  const s = String(v);
  return s.startsWith("#/") ? s : "#/";
}

/** replace empties el and appends the children. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** field is a labelled form control: a label element wrapping the text and the control, and a hint. */
export function field(label, control, hint) {
  const id = control.id || ("f-" + Math.random().toString(36).slice(2, 10));
  control.id = id;
  const parts = [h("label", { for: id }, label), control];
  if (hint) {
    const hid = id + "-hint";
    control.setAttribute("aria-describedby", hid);
    parts.push(h("p", { class: "hint", id: hid }, hint));
  }
  return h("div", { class: "field" }, parts);
}

/** dl renders [term, value] pairs as a description list (values as text or nodes). */
export function dl(pairs) {
  return h("dl", { class: "kv" }, pairs.filter(Boolean).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v ?? "—")]));
}

/** table renders rows (arrays of text or nodes) under a header row; each cell carries its column's name
 * (data-label), which a phone-width layout shows beside the value instead of the header row. */
export function table(caption, head, rows) {
  return h("div", { class: "table-wrap" },
    h("table", {},
      caption ? h("caption", {}, caption) : null,
      h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c, i) => h("td", { "data-label": head[i] || null }, c)))))));
}
