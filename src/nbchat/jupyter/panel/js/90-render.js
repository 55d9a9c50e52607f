// ---------------------------------------------------------------- the panel
// render builds the parts, wires them, follows the kernel's state and draws it
// once; what it returns undoes all of it when the view goes.

// -- following state
function follow(v) {
  const { model, box, on } = v;
  on("change:value", () => {
    if (box.value !== model.get("value")) {
      box.value = model.get("value");
      grow(v);
    }
  });
  on("change:threads change:thread_id", () => {
    drawHeader(v);
    drawThreads(v);
  });
  on("change:title change:confirm change:confirm_action", () => drawHeader(v));
  on("change:preview_html", () => drawPreview(v));
  on("change:messages change:hidden", () => drawMessages(v));
  on("change:streaming_message", () => drawLive(v));
  on("change:streaming", () => drawStreaming(v));
  on("change:status_text change:status_kind change:usage_text", () => drawStatus(v));
  on("change:gauge", () => drawGauge(v));
  on("change:tools_line", () => drawToolsLine(v));
  on("change:models change:model change:model_groups", () => drawModels(v));
  on("change:mode change:streaming change:agent", () => drawMode(v));
  on("change:agents change:agent change:streaming change:models", () => drawAgents(v));
  on("change:variables change:picked change:attachable", () => drawChips(v));
  on("change:prompts", () => drawPrompts(v));
  on("change:placeholder", () => { box.placeholder = model.get("placeholder"); });
  on("change:_focus", () => onFocus(v));
}

// Polling: one question in flight at most, so that a busy kernel never
// finds a queue of them; none while the panel is hidden. While nothing
// changes the wait grows, up to four times poll_seconds; a change, or the
// person using the panel, brings it back. Returns the timer.
function startPolling(v) {
  const { model, el } = v;
  let waitingSince = 0;
  let lastPoll = Date.now();
  let slower = 1;
  v.on("msg:custom", (message) => {
    if (!message || message.event !== "polled") return;
    waitingSince = 0;
    slower = message.changed ? 1 : Math.min(4, slower * 1.5);
  });
  for (const name of ["pointerdown", "keydown", "focusin"]) v.listen(el, name, () => { slower = 1; });
  return setInterval(() => {
    fit(v);
    const seconds = model.get("poll_seconds") * slower;
    const now = Date.now();
    if (!(seconds > 0) || now - lastPoll < seconds * 1000) return;
    if (waitingSince && now - waitingSince < 30000) return;
    if (document.hidden || !el.isConnected || el.offsetParent === null) return;
    lastPoll = now;
    waitingSince = now;
    model.send({ event: "poll" });
  }, 250);
}

function render({ model, el }) {
  el.classList.add("nbchat-panel", `nbchat-panel-${model.get("area")}`);
  const cleanups = [];
  const listen = (target, name, handler, options) => {
    target.addEventListener(name, handler, options);
    cleanups.push(() => target.removeEventListener(name, handler, options));
  };
  const on = (names, handler) => {
    model.on(names, handler);
    cleanups.push(() => model.off(names, handler));
  };
  const intent = (event, value) => model.send(value === undefined ? { event } : { event, value });
  const v = buildView(model, el);
  Object.assign(v, { cleanups, listen, on, intent });

  wireConversation(v);
  wireChips(v);
  wireInput(v);
  wireComposer(v);
  wireHeader(v);
  wireRename(v);
  wireShortcut(v);
  if (model.get("_focus_steal")) requestAnimationFrame(() => onFocus(v));
  follow(v);

  drawHeader(v);
  drawThreads(v);
  drawMessages(v);
  drawLive(v);
  drawStatus(v);
  drawGauge(v);
  drawPreview(v);
  drawToolsLine(v);
  drawModels(v);
  drawMode(v);
  drawAgents(v);
  drawChips(v);
  drawStreaming(v);
  drawPrompts(v);
  requestAnimationFrame(() => grow(v));

  // ---------------------------------------------------------- size and polling
  listen(window, "resize", () => {
    fit(v);
    grow(v);
  });
  const timer = startPolling(v);
  requestAnimationFrame(() => fit(v));

  // Text that other widgets (the prompts) put in the panel gets the glyph swap too.
  let observer = null;
  if (emojiReplacements().length) {
    observer = new MutationObserver(() => replaceEmoji(el));
    observer.observe(el, { childList: true, subtree: true, characterData: true });
  }

  return () => {
    clearInterval(timer);
    if (observer) observer.disconnect();
    for (const view of v.views.values()) view.remove();
    for (const cleanup of cleanups) cleanup();
  };
}

export default { render };
