// Copy buttons: <button data-copy-target="ID"> copies the text of the element ID.
"use strict";
document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy-target]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copyTarget);
  const done = document.getElementById("copy-done");
  const text = source.textContent.trim();
  try {
    await navigator.clipboard.writeText(text);
  } catch (error) {
    // No clipboard API (a page served over plain http from another host): select the text
    // so that Ctrl-C copies it.
    const range = document.createRange();
    range.selectNodeContents(source);
    window.getSelection().removeAllRanges();
    window.getSelection().addRange(range);
    document.execCommand("copy");
  }
  if (done) done.hidden = false;
});
