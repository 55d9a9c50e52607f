// The panel's question box: Enter sends, Shift+Enter is a new line, Escape
// stops a streaming answer, Up in an empty box recalls earlier questions.
// It also asks the kernel, about once a second while the panel is visible,
// whether the thread store changed, and swaps status emoji for glyphs that
// plain fonts have when the browser has no emoji font.

const FALLBACKS = [
  ["\u{1F527}", ["\u2699", "[tool]"]], // 🔧 → ⚙
  ["\u23F8\uFE0F", ["\u275A\u275A", "[paused]"]], // ⏸️
  ["\u23F8", ["\u275A\u275A", "[paused]"]], // ⏸ → ❚❚
  ["\u23F9\uFE0F", ["\u25A0", "[stopped]"]], // ⏹️
  ["\u23F9", ["\u25A0", "[stopped]"]], // ⏹ → ■
];
const MISSING = "\u{10FFFD}"; // a private-use code point no font draws

let replacements = null; // computed once per page

function pixels(ctx, text) {
  ctx.clearRect(0, 0, 32, 32);
  ctx.fillText(text, 0, 0);
  return ctx.getImageData(0, 0, 32, 32).data.join(",");
}

function emojiReplacements() {
  if (replacements !== null) return replacements;
  replacements = [];
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 32;
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  if (!ctx) return replacements;
  ctx.font = "24px sans-serif";
  ctx.textBaseline = "top";
  const missing = pixels(ctx, MISSING);
  for (const [emoji, [glyph, word]] of FALLBACKS) {
    const base = emoji.replace("\uFE0F", "");
    if (pixels(ctx, base) !== missing) continue; // some font draws it
    replacements.push([emoji, pixels(ctx, glyph) !== missing ? glyph : word]);
  }
  return replacements;
}

function replaceEmoji(root) {
  const swaps = emojiReplacements();
  if (!swaps.length || !root) return;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement && node.parentElement.closest("textarea")) continue;
    let text = node.nodeValue;
    for (const [emoji, glyph] of swaps) {
      if (text.includes(emoji)) text = text.split(emoji).join(glyph);
    }
    if (text !== node.nodeValue) node.nodeValue = text;
  }
}

function render({ model, el }) {
  el.classList.add("nbchat-input");
  const box = document.createElement("textarea");
  box.className = "nbchat-input-box";
  box.rows = 3;
  box.setAttribute("aria-label", "Question");
  el.appendChild(box);

  const sync = () => {
    box.placeholder = model.get("placeholder");
    box.disabled = model.get("disabled");
    el.classList.toggle("nbchat-streaming", model.get("streaming"));
  };
  sync();
  box.value = model.get("value");

  let recalled = -1; // which history entry the box shows, -1: the person's own text
  // The text goes to the kernel as a message, not as a state update: ipywidgets
  // holds back state updates while one is unanswered, so a click on Send could
  // overtake the last keys typed. Messages keep their order.
  const sendValue = () => {
    model.set("value", box.value); // locally only, so that the kernel's "" is a change
    model.send({ event: "value", value: box.value });
  };
  const setValue = (text) => {
    box.value = text;
    sendValue();
  };

  box.addEventListener("input", () => {
    recalled = -1;
    sendValue();
  });
  box.addEventListener("keydown", (event) => {
    // JupyterLab's shortcuts (Shift+Enter runs a cell, Escape leaves edit mode)
    // must not see keys typed here.
    event.stopPropagation();
    if (event.isComposing) return;
    const plain = !event.shiftKey && !event.altKey && !event.ctrlKey && !event.metaKey;
    if (event.key === "Enter" && plain) {
      event.preventDefault();
      // While an answer streams the kernel says so in the panel's status line.
      if (model.get("disabled") || !box.value.trim()) return;
      recalled = -1;
      model.set("value", box.value);
      model.send({ event: "submit", value: box.value });
    } else if (event.key === "Escape" && model.get("streaming")) {
      event.preventDefault();
      model.send({ event: "stop" });
    } else if (event.key === "ArrowUp" && plain) {
      const history = model.get("history");
      const atStart = box.selectionStart === 0 && box.selectionEnd === 0;
      if (!history.length || !(box.value === "" || (recalled >= 0 && atStart))) return;
      event.preventDefault();
      recalled = recalled < 0 ? history.length - 1 : Math.max(0, recalled - 1);
      setValue(history[recalled]);
      box.setSelectionRange(0, 0);
    } else if (event.key === "ArrowDown" && plain && recalled >= 0) {
      const atEnd = box.selectionStart === box.value.length;
      if (!atEnd) return;
      event.preventDefault();
      const history = model.get("history");
      recalled = recalled + 1 < history.length ? recalled + 1 : -1;
      setValue(recalled < 0 ? "" : history[recalled]);
    }
  });
  for (const name of ["keyup", "keypress"]) {
    box.addEventListener(name, (event) => event.stopPropagation());
  }

  const onValue = () => {
    if (box.value !== model.get("value")) box.value = model.get("value");
  };
  const onFocus = () => {
    // Take the focus back from inside the panel (or from nowhere), never from a
    // notebook cell the person moved to meanwhile, unless the panel was just
    // opened on purpose (_focus_steal).
    const panel = el.closest(".nbchat-panel") || el;
    const active = document.activeElement;
    const steal = model.get("_focus_steal");
    if (steal || !active || active === document.body || panel.contains(active)) {
      box.focus();
    }
    if (steal) model.send({ event: "focused" });
  };
  if (model.get("_focus_steal")) requestAnimationFrame(onFocus);
  model.on("change:value", onValue);
  model.on("change:placeholder change:disabled change:streaming", sync);
  model.on("change:_focus", onFocus);

  // Polling: one question in flight at most, so that a busy kernel never
  // finds a queue of them; none while the panel is hidden.
  let waitingSince = 0;
  let lastPoll = Date.now();
  const onMessage = (message) => {
    if (message && message.event === "polled") waitingSince = 0;
  };
  model.on("msg:custom", onMessage);
  const timer = setInterval(() => {
    watchEmoji();
    const seconds = model.get("poll_seconds");
    const now = Date.now();
    if (!(seconds > 0) || now - lastPoll < seconds * 1000) return;
    if (waitingSince && now - waitingSince < 30000) return;
    if (document.hidden || !el.isConnected || el.offsetParent === null) return;
    lastPoll = now;
    waitingSince = now;
    model.send({ event: "poll" });
  }, 250);

  // The view is put in the page after render(): watch the panel once it is there.
  let observer = null;
  const watchEmoji = () => {
    const root = el.closest(".nbchat-panel");
    if (observer || !root || !emojiReplacements().length) return;
    replaceEmoji(root);
    observer = new MutationObserver(() => replaceEmoji(root));
    observer.observe(root, { childList: true, subtree: true, characterData: true });
  };
  requestAnimationFrame(watchEmoji);

  return () => {
    clearInterval(timer);
    if (observer) observer.disconnect();
    model.off("change:value", onValue);
    model.off("change:placeholder change:disabled change:streaming", sync);
    model.off("change:_focus", onFocus);
    model.off("msg:custom", onMessage);
  };
}

export default { render };
