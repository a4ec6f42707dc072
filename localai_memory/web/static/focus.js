// Keyboard users keep their place when htmx replaces what they acted on (a suggestion card after Save or
// Don't save, an Undo): focus moves into the new content (its first control, or the content itself), not
// back to the top of the page. The chat's composer is outside the conversation htmx replaces: after a reply
// it keeps the focus, or gets it back when it was lost (on the Send button, disabled while the model answered),
// and stays in view under the reply. After a form's redirect, the message shown where it landed gets the focus.
(function () {
  "use strict";
  // A message shown where a form's redirect landed (a section of the Memory tab, say): focused, so it is in
  // view and read out, and the next Tab goes on from the part of the page the person was in. Once the page
  // has loaded: the browser's own move to the #fragment would take the focus back to the page.
  window.addEventListener("load", function () {
    setTimeout(function () {
      const here = document.querySelector("[data-flash-here]");
      if (here && here.isConnected) { here.focus(); }
    }, 0);
  });
  let refocus = null;
  let timer = null;
  document.addEventListener("htmx:beforeRequest", function (event) {
    const target = event.detail.target;
    const active = document.activeElement;
    refocus = null;
    if (target && target.id !== "conversation" && active && target.contains(active)) {
      refocus = target.id ? { id: target.id } : { parent: target.parentElement };
    }
  });
  // A request that failed to send, or an answer that swaps nothing, leaves no place to return to.
  document.addEventListener("htmx:sendError", function () { refocus = null; });
  document.addEventListener("htmx:afterRequest", function (event) {
    const status = event.detail.xhr ? event.detail.xhr.status : 0;
    if (status === 0 || status === 204) { refocus = null; }
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    const box = document.getElementById("id_content");
    if (!box || !event.detail.target || event.detail.target.id !== "conversation") { return; }
    const active = document.activeElement;
    if (!active || active === document.body || active === box) {
      box.focus({ preventScroll: true });
      box.form.scrollIntoView({ block: "nearest" });
    }
  });
  // One response settles several swaps (the card, the inbox count): focus once the last one is done.
  document.addEventListener("htmx:afterSettle", function () {
    if (!refocus) { return; }
    clearTimeout(timer);
    timer = setTimeout(function () {
      const place = refocus && (refocus.id ? document.getElementById(refocus.id) : refocus.parent);
      refocus = null;
      if (!place || !place.isConnected) { return; }
      const control = place.querySelector("button:not([disabled]), a[href], input:not([type=hidden]), textarea, select");
      if (control) { control.focus(); return; }
      place.setAttribute("tabindex", "-1");
      place.focus();
    }, 0);
  });
})();
