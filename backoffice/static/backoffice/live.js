// Live admin pages: a job's timeline and a conversation's transcript follow their event
// streams (server-sent events, read under the staff session) without a reload.
//
// The element with data-events-url is the page's live part; data-last-event-id is the
// stream's last event when the page was rendered, so the stream sends only what is new.
// EventSource reconnects on its own and resumes after the last id it received.
"use strict";
const startLive = () => {
  const TERMINAL = ["finished", "failed", "cancelled"];
  const root = document.querySelector("[data-events-url]");
  if (!root) return;

  const element = (tag, className, text) => {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  };

  const badge = (status) => element("span", `job-status job-status-${status}`, status);

  // --- A job's timeline ----------------------------------------------------------------

  const timeline = () => {
    let list = document.getElementById("step-timeline");
    if (!list) {
      list = element("ol", "timeline");
      list.id = "step-timeline";
      root.querySelectorAll(".live-empty").forEach((node) => node.remove());
      root.appendChild(list);
    }
    return list;
  };

  const stepItem = (index) => {
    let item = document.getElementById(`step-${index}`);
    if (!item) {
      item = element("li", "step-running live-step");
      item.id = `step-${index}`;
      const head = element("div", "step-head");
      head.append(`#${index} `, element("span", "step-kind"), " ", element("span", "step-name"));
      head.append(" ", element("span", "step-badge"));
      item.appendChild(head);
      timeline().appendChild(item);
    }
    return item;
  };

  const liveText = (item) => {
    let box = item.querySelector(".step-tokens");
    if (!box) {
      box = element("pre", "step-tokens");
      item.appendChild(box);
    }
    return box;
  };

  const showStep = (step) => {
    const item = stepItem(step.index);
    item.className = item.className.replace(/\bstep-\w+/g, "").trim();
    item.classList.add(`step-${step.status}`);
    const kind = item.querySelector(".step-head .step-kind");
    if (item.classList.contains("live-step")) {
      kind.textContent = step.kind;
      item.querySelector(".step-name").textContent = step.name;
      item.querySelector(".step-badge").replaceChildren(badge(step.status));
      if (step.output && typeof step.output.text === "string") {
        liveText(item).textContent = step.output.text;
      }
      // A model call whose text the job did not keep (docs/events.md): shown, struck through.
      if (step.output && step.output.discarded) {
        item.classList.add("step-discarded");
        item.querySelector(".step-badge").append(` discarded: ${step.output.discarded}`);
      }
    } else {
      const old = item.querySelector(".step-head .job-status");
      if (old) old.replaceWith(badge(step.status));
    }
  };

  const showStatus = (data) => {
    const field = document.querySelector(".field-status_colour .readonly");
    if (field) field.replaceChildren(badge(data.status));
    const note = document.getElementById("live-note");
    if (note && TERMINAL.includes(data.status)) {
      note.textContent = `The job is ${data.status}. Reload the page for its full record.`;
      document.getElementById("job-cancel")?.closest("li")?.remove();
    }
  };

  // --- A conversation's transcript -----------------------------------------------------

  const transcript = () => {
    let box = document.getElementById("transcript");
    if (!box) {
      box = element("div", "transcript");
      box.id = "transcript";
      root.querySelectorAll(".live-empty").forEach((node) => node.remove());
      root.appendChild(box);
    }
    return box;
  };

  const showMessage = (message) => {
    document.getElementById("live-reply")?.remove();
    if (document.getElementById(`message-${message.seq}`)) return;
    const item = element("div", `chat-message role-${message.role}`);
    item.id = `message-${message.seq}`;
    const meta = element("div", "chat-meta");
    // As the page writes times (the site's time zone is UTC): 2026-01-31 12:34:56.
    const when = message.created_at.replace("T", " ").slice(0, 19);
    meta.append(element("strong", "", `#${message.seq} ${message.role}`), ` ${when}`);
    item.append(meta, element("div", "chat-content", message.content));
    transcript().appendChild(item);
  };

  const showReplyToken = (data) => {
    let reply = document.getElementById("live-reply");
    if (!reply) {
      reply = element("div", "chat-message role-assistant live-reply");
      reply.id = "live-reply";
      reply.append(element("div", "chat-meta", "assistant, writing…"), element("div", "chat-content"));
      transcript().appendChild(reply);
    }
    reply.querySelector(".chat-content").append(data.text);
    reply.dataset.step = data.step;
  };

  // The text of a reply step that is not kept (asked again, replaced, or the chat ended
  // without a reply) is taken back; the next step writes the reply.
  const takeBack = (data) => {
    const reply = document.getElementById("live-reply");
    if (reply && reply.dataset.step === String(data.step)) reply.remove();
  };

  // --- The stream ----------------------------------------------------------------------

  const url = new URL(root.dataset.eventsUrl, window.location.href);
  if (root.dataset.lastEventId) url.searchParams.set("last_event_id", root.dataset.lastEventId);
  const source = new EventSource(url);
  const on = (type, handle) =>
    source.addEventListener(type, (event) => handle(JSON.parse(event.data)));
  if (root.dataset.stream === "job") {
    on("step", showStep);
    on("token", (data) => liveText(stepItem(data.step)).append(data.text));
    on("status", (data) => {
      showStatus(data);
      // The server ends the stream after a terminal status: do not reconnect.
      if (TERMINAL.includes(data.status)) source.close();
    });
  } else {
    on("message", showMessage);
    on("token", showReplyToken);
    on("discard", takeBack);
  }
};
if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", startLive);
else startLive();
