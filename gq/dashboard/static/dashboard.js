// gq dashboard: live refresh, select-all and confirmations. Served by gq itself; the
// pages carry no inline script (the Content-Security-Policy forbids it).
(function () {
  "use strict";

  var every = Number(document.body.getAttribute("data-refresh")) || 0;
  var status = document.getElementById("live-status");

  // Live refresh: fetch this page again and swap each [data-live] region for the fresh
  // one. The server escaped everything; DOMParser documents run no script.
  function busy() {
    return document.hidden || document.querySelector("[data-live] input:checked") !== null;
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    document.querySelectorAll("[data-live]").forEach(function (old) {
      var next = fresh.getElementById(old.id);
      if (next) { old.replaceWith(document.importNode(next, true)); }
    });
    status.classList.remove("stale");
  }

  function refresh() {
    if (busy()) { return; }
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.text(); })
      .then(swap)
      .catch(function () { status.classList.add("stale"); });
  }

  if (every >= 2 && document.querySelector("[data-live]")) {
    status.hidden = false;
    window.setInterval(refresh, every * 1000);
  }

  // "Select all" box of a job list, and bulk buttons enabled only with a selection.
  function boxes() { return document.querySelectorAll("input[name=id][type=checkbox]"); }
  function update() {
    var any = Array.prototype.some.call(boxes(), function (b) { return b.checked; });
    document.querySelectorAll("[data-needs-selection]").forEach(function (b) { b.disabled = !any; });
  }
  document.addEventListener("change", function (e) {
    if (e.target.hasAttribute("data-select-all")) {
      boxes().forEach(function (b) { b.checked = e.target.checked; });
    }
    update();
  });
  update();

  // Changes to every job of a set ask first (the form's question, or its button's).
  document.addEventListener("submit", function (e) {
    var button = e.submitter;
    var question = (button && button.getAttribute("data-confirm")) ||
      e.target.getAttribute("data-confirm");
    if (question && !window.confirm(question)) { e.preventDefault(); }
  });
})();
