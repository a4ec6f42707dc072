// A menu that opens in place (<details data-menu>, the chat's Tools) closes as a menu does: Esc closes it and
// gives the focus back to its button; a click anywhere outside it closes it. Without this script it is a
// plain disclosure, opened and closed by its button.
(function () {
  "use strict";
  function openMenus() {
    return Array.prototype.slice.call(document.querySelectorAll("details[data-menu][open]"));
  }
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || event.defaultPrevented) { return; }
    openMenus().forEach(function (menu) {
      const inside = menu.contains(document.activeElement);
      menu.open = false;
      if (inside) { menu.querySelector("summary").focus(); }
    });
  });
  document.addEventListener("click", function (event) {
    openMenus().forEach(function (menu) {
      if (!menu.contains(event.target)) { menu.open = false; }
    });
  });
})();
