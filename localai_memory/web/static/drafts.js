// What a person types in a form marked data-draft="<key>" (the chat's message box, Add a note) is kept in this
// tab (sessionStorage) until the server has it: a session that ended, a page made stale by a log-in in another
// tab, a reload or a failed send do not lose it. It is filled in again when its form is shown empty; a form the
// page fills in itself (what it refused, a message offered back) makes that the draft.
//
// A form htmx sends is cleared when the answer says the server took the text (the "draft-taken" event of
// HX-Trigger), and only in the fields that still hold what was sent: what was typed while the answer was on
// its way stays. A form the browser sends itself (one without htmx, or one htmx has not taken yet because the
// page is still loading) is marked sent; the next page that shows that form clears it, unless a page between
// said the form was refused (the log-in page, the stale-page page: <meta name="drafts" content="refused">).
// The key names the person, so another account never sees it.
(function () {
  "use strict";
  const PREFIX = "draft:";
  const TEXT = new Set(["text", "search", "url", "email", "tel", "number"]);
  const REFUSED_WITHIN_MS = 10 * 60 * 1000;  // a refusal answers a form sent just before it, not one from long ago

  function store() {
    try { return window.sessionStorage; } catch (e) { return null; }  // storage off: forms work as before
  }
  function read(key) {
    const s = store();
    try { return s ? JSON.parse(s.getItem(PREFIX + key)) : null; } catch (e) { return null; }
  }
  function write(key, draft) {
    const s = store();
    try { if (s) { s.setItem(PREFIX + key, JSON.stringify(draft)); } } catch (e) { /* full: keep going */ }
  }
  function forget(key) {
    const s = store();
    if (s) { s.removeItem(PREFIX + key); }
  }
  function fieldsOf(form) {
    return Array.from(form.elements).filter(function (el) {
      return el.name && (el.tagName === "TEXTAREA" || (el.tagName === "INPUT" && TEXT.has(el.type)));
    });
  }
  function valuesOf(form) {
    const values = {};
    fieldsOf(form).forEach(function (el) { values[el.name] = el.value; });
    return values;
  }
  function keep(form, sent) {
    const values = valuesOf(form);
    if (Object.values(values).every(function (v) { return !v.trim(); })) {
      forget(form.dataset.draft);
    } else {
      write(form.dataset.draft, { fields: values, sent: sent ? Date.now() : 0 });
    }
  }
  function restore(form) {
    const draft = read(form.dataset.draft);
    if (draft && draft.sent) { forget(form.dataset.draft); }  // sent and not refused: the server had it
    const fields = fieldsOf(form);
    if (fields.some(function (el) { return el.value.trim(); })) {
      keep(form, false);  // the page filled it in itself (what it refused, a message offered back): the draft now
      return;
    }
    if (!draft || draft.sent || !draft.fields) { return; }
    fields.forEach(function (el) {
      if (typeof draft.fields[el.name] === "string") { el.value = draft.fields[el.name]; }
    });
    const details = form.closest("details");
    if (details) { details.open = true; }
  }
  function refused() {
    const s = store();
    if (!s) { return; }
    for (let i = 0; i < s.length; i++) {
      const key = s.key(i);
      if (!key || key.indexOf(PREFIX) !== 0) { continue; }
      const draft = read(key.slice(PREFIX.length));
      if (draft && draft.sent && Date.now() - draft.sent < REFUSED_WITHIN_MS) {
        write(key.slice(PREFIX.length), { fields: draft.fields, sent: 0 });
      }
    }
  }
  function draftForm(el) {
    const form = el && (el.tagName === "FORM" ? el : el.form || (el.closest && el.closest("form")));
    return form && form.dataset && form.dataset.draft ? form : null;
  }

  document.addEventListener("input", function (event) {
    const form = draftForm(event.target);
    if (form) { keep(form, false); }
  });
  // Bubbling here, after the form's own listeners: htmx, once it has taken a form, cancels the browser's post,
  // and its answer says whether the server took the text. A submit left to go on is the browser's own post,
  // the page leaving with it: a form htmx has not taken yet (the page still loading) or never takes.
  document.addEventListener("submit", function (event) {
    const form = draftForm(event.target);
    if (form && !event.defaultPrevented) { keep(form, true); }
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    const form = draftForm(event.detail.elt);
    if (form) { form.draftSent = valuesOf(form); }
  });
  document.addEventListener("draft-taken", function (event) {
    const form = draftForm(event.target);
    if (!form) { return; }
    const sent = form.draftSent || {};
    fieldsOf(form).forEach(function (el) { if (el.value === sent[el.name]) { el.value = ""; } });
    form.draftSent = null;
    keep(form, false);
  });
  function start() {
    if (document.querySelector('meta[name="drafts"][content="refused"]')) { refused(); }
    document.querySelectorAll("form[data-draft]").forEach(restore);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
