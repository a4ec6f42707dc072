// Times are rendered on the server in UTC ("2 Dec, 14:05 UTC"); this shows each <time data-local="…"> in the
// reader's own time zone instead, with the zone's short name, and keeps the UTC text as its tooltip.
// Without JavaScript the UTC text stays. htmx:load covers cards swapped in after the page loaded.
(function () {
  "use strict";
  var FORMATS = {
    "time": {hour: "2-digit", minute: "2-digit", timeZoneName: "short"},
    "day-time": {day: "numeric", month: "short", hour: "2-digit", minute: "2-digit", timeZoneName: "short"},
    "date-time": {day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit",
                  timeZoneName: "short"},
    "date-time-seconds": {day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit",
                          second: "2-digit", timeZoneName: "short"}
  };

  function localise(root) {
    if (!root || !root.querySelectorAll) return;
    var times = root.querySelectorAll("time[data-local]");
    for (var i = 0; i < times.length; i++) {
      var element = times[i];
      var when = new Date(element.getAttribute("datetime"));
      if (isNaN(when.getTime())) continue;
      if (!element.hasAttribute("title")) element.setAttribute("title", element.textContent.trim());
      var options = FORMATS[element.getAttribute("data-local")] || FORMATS["date-time"];
      element.textContent = new Intl.DateTimeFormat(undefined, options).format(when);
    }
  }

  document.addEventListener("DOMContentLoaded", function () { localise(document); });
  document.addEventListener("htmx:load", function (event) { localise(event.target); });
})();
