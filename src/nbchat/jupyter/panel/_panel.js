// The chat panel's front end: a header with the thread's title and a thread
// switcher, the conversation as messages, and an input with the model picker
// and context chips. State comes from the kernel's traits; what the person
// does goes back as custom messages ({event: "submit" | "stop" | ...}).
//
// Only the `html` of a message (made in Python by nbchat.markup) is set as
// HTML. Every other text (questions, titles, model names, usage, errors)
// goes in with textContent.

const SHORTCUT = "Alt+Shift+C";

// The shortcut goes to one panel: the side one when it shows, else the first
// one in view. One listener for the page, whatever the number of panels (each
// widget may load its own copy of this module: the registry is the page's).
const shortcut = (globalThis.__nbchatPanelShortcut ??= { inputs: new Map(), listening: false });
const inputs = shortcut.inputs; // panel element -> its input box

function onShortcut(event) {
  if (!(event.altKey && event.shiftKey && event.code === "KeyC")) return;
  const shown = [...inputs].filter(([panel]) => panel.isConnected && panel.offsetParent !== null);
  const inView = ([panel]) => {
    const box = panel.getBoundingClientRect();
    return box.bottom > 0 && box.top < window.innerHeight;
  };
  const side = shown.find(([panel]) => panel.classList.contains("nbchat-panel-side"));
  const target = side || shown.find(inView);
  if (!target) return;
  event.preventDefault();
  event.stopPropagation();
  target[1].focus();
}

function icon(name) {
  const mark = document.createElement("span");
  mark.className = `nbchat-icon nbchat-icon-${name}`; // drawn by _panel.css
  mark.setAttribute("aria-hidden", "true");
  return mark;
}

function node(tag, cls, text) {
  const el = document.createElement(tag);
  if (cls) el.className = cls;
  if (text !== undefined) el.textContent = text;
  return el;
}

// A widget button, as JupyterLab's widgets make them (jupyter-button), styled by _panel.css.
function button(cls, text) {
  const made = node("button", `jupyter-button ${cls}`, text);
  made.type = "button";
  return made;
}

function iconButton(name, label, cls) {
  const made = button(`nbchat-icon-button ${cls || ""}`);
  made.title = label;
  made.setAttribute("aria-label", label);
  made.appendChild(icon(name));
  return made;
}

// A button with an icon and its word beside it.
function labelButton(name, label, cls) {
  const made = button(`nbchat-label-button ${cls || ""}`);
  made.append(icon(name), node("span", "", label));
  return made;
}

// ---------------------------------------------------------------- status emoji

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
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement && n.parentElement.closest("textarea, input")) continue;
    let text = n.nodeValue;
    for (const [emoji, glyph] of swaps) {
      if (text.includes(emoji)) text = text.split(emoji).join(glyph);
    }
    if (text !== n.nodeValue) n.nodeValue = text;
  }
}

// ---------------------------------------------------------------- code blocks

function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    return navigator.clipboard.writeText(text).then(() => true, () => copyByCommand(text));
  }
  return Promise.resolve(copyByCommand(text));
}

function copyByCommand(text) {
  const area = node("textarea");
  area.value = text;
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.appendChild(area);
  area.select();
  let done = false;
  try {
    done = document.execCommand("copy");
  } catch (_) {
    done = false;
  }
  area.remove();
  return done;
}

// The notebook this kernel's widgets belong to, when the front end is
// JupyterLab (its widget manager knows the document); null elsewhere.
function notebookModel(model) {
  const manager = model.widget_manager;
  const context = manager && manager.context;
  const shared = context && context.model && context.model.sharedModel;
  return shared && typeof shared.insertCell === "function" ? shared : null;
}

function insertIndex(shared, el) {
  const cells = shared.cells ? shared.cells.length : 0;
  const notebook =
    el.closest(".jp-Notebook") ||
    document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook");
  if (!notebook) return cells;
  const shown = [...notebook.querySelectorAll(".jp-Cell")];
  const active = shown.findIndex((cell) => cell.classList.contains("jp-mod-active"));
  return shown.length === cells && active >= 0 ? active + 1 : cells;
}

function decorateCode(body, model, el) {
  for (const pre of body.querySelectorAll("pre")) {
    if (pre.parentElement && pre.parentElement.classList.contains("nbchat-codeblock")) continue;
    const block = node("div", "nbchat-codeblock");
    pre.replaceWith(block);
    block.appendChild(pre);
    const tools = node("div", "nbchat-code-tools");
    const copy = labelButton("copy", "Copy", "nbchat-copy");
    copy.addEventListener("click", () => {
      copyText(pre.textContent).then((done) => {
        copy.classList.toggle("nbchat-done", !!done);
        copy.lastChild.textContent = done ? "Copied" : "Copy failed";
        setTimeout(() => {
          copy.classList.remove("nbchat-done");
          copy.lastChild.textContent = "Copy";
        }, 1500);
      });
    });
    tools.appendChild(copy);
    if (notebookModel(model)) {
      const insert = labelButton("cell", "Insert", "nbchat-insert");
      insert.title = "Insert as a new cell";
      insert.setAttribute("aria-label", "Insert as a new cell");
      insert.addEventListener("click", () => {
        const shared = notebookModel(model);
        if (!shared) return;
        const source = pre.textContent.replace(/\n$/, "");
        shared.insertCell(insertIndex(shared, el), { cell_type: "code", source, metadata: {} });
      });
      tools.appendChild(insert);
    }
    block.appendChild(tools);
  }
}

// ---------------------------------------------------------------- messages

function usageLine(text) {
  // One span a value, so that a narrow panel wraps between values, never inside one.
  const line = node("div", "nbchat-message-usage");
  const small = node("small");
  text.split(" · ").forEach((part, n) => {
    if (n) small.appendChild(document.createTextNode(" · "));
    small.appendChild(node("span", "nbchat-value", part));
  });
  line.appendChild(small);
  return line;
}

function messageNodes(message, model, el) {
  const nodes = [];
  if (message.query) {
    const mine = node("div", "nbchat-message nbchat-from-person");
    mine.append(node("div", "nbchat-who", "You"), node("div", "nbchat-bubble", message.query));
    nodes.push(mine);
  }
  const theirs = node("div", "nbchat-message nbchat-from-model");
  const who = node("div", "nbchat-who");
  who.append(node("span", "nbchat-avatar"), node("span", "nbchat-value", message.model || "Assistant"));
  theirs.appendChild(who);
  const body = node("div", "nbchat-md nbchat-body");
  body.innerHTML = message.html || ""; // made by nbchat.markup in the kernel
  decorateCode(body, model, el);
  theirs.appendChild(body);
  // The model has its own line above: the footer is the time and the usage.
  const about = [message.time, message.usage].filter(Boolean);
  if (about.length) theirs.appendChild(usageLine(about.join(" · ")));
  nodes.push(theirs);
  return nodes;
}

// ---------------------------------------------------------------- the side area

const SIDE_WIDTH = 340; // px; JupyterLab opens its right side area 250 px wide

// Widen JupyterLab's right side area once, as dragging its edge would (the
// layout keeps the width the way it keeps a drag); a wider one is left alone.
function widenSide(el) {
  const stack = el.closest("#jp-right-stack");
  const area = stack && stack.closest(".lm-SplitPanel-child"); // the side area with its tab bar
  const split = area && area.parentElement;
  if (!split || !split.classList.contains("lm-SplitPanel")) return;
  const left = area.getBoundingClientRect().left;
  const handles = [...split.children].filter((c) => c.classList.contains("lm-SplitPanel-handle"));
  const handle = handles.find((h) => Math.abs(h.getBoundingClientRect().right - left) < 3);
  const wanted = Math.min(SIDE_WIDTH, window.innerWidth / 3);
  const short = wanted - stack.getBoundingClientRect().width;
  if (!handle || short < 10) return;
  const box = handle.getBoundingClientRect();
  const at = (x) => ({ clientX: x, clientY: box.top + box.height / 2, button: 0,
                       pointerId: 1, isPrimary: true, bubbles: true });
  const x = box.left + box.width / 2;
  handle.dispatchEvent(new PointerEvent("pointerdown", at(x)));
  document.dispatchEvent(new PointerEvent("pointermove", at(x - short)));
  document.dispatchEvent(new PointerEvent("pointerup", at(x - short)));
}

// ---------------------------------------------------------------- the panel

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

  // -- header: switcher, title, gauge, new, delete
  const header = node("div", "nbchat-header");
  const switcher = iconButton("list", "Threads", "nbchat-switch");
  switcher.setAttribute("aria-expanded", "false");
  const title = button("nbchat-title");
  const rename = iconButton("pencil", "Rename thread", "nbchat-rename");
  const titleEdit = node("input", "nbchat-title-edit");
  titleEdit.setAttribute("aria-label", "Title");
  titleEdit.hidden = true;
  const gauge = node("div", "nbchat-gauge");
  const gaugeBar = node("span", "nbchat-gauge-bar");
  const gaugeFill = node("span", "nbchat-gauge-fill");
  gaugeBar.appendChild(gaugeFill);
  const gaugeText = node("span", "nbchat-gauge-text");
  gauge.append(gaugeBar, gaugeText);
  const newButton = iconButton("plus", "New thread", "nbchat-new");
  const deleteButton = labelButton("trash", "Delete this thread", "nbchat-delete");
  deleteButton.setAttribute("aria-label", "Delete thread");
  header.append(switcher, title, titleEdit, rename, newButton);
  // The thread's totals and its context gauge, in one row under the header.
  const usage = node("div", "nbchat-usage");
  const totals = node("span", "nbchat-totals");
  usage.append(totals, gauge);

  const confirm = node("div", "nbchat-confirm");
  const confirmText = node("span");
  const confirmYes = button("nbchat-button nbchat-danger", "Delete");
  const confirmNo = button("nbchat-button", "Cancel");
  confirm.append(confirmText, confirmYes, confirmNo);

  const threadsPop = node("div", "nbchat-threads-pop");
  threadsPop.hidden = true;
  const search = node("input", "nbchat-search");
  search.type = "search";
  search.placeholder = "Search threads";
  search.setAttribute("aria-label", "Search threads");
  const popNew = iconButton("plus", "New thread", "nbchat-new");
  const popRefresh = iconButton("refresh", "Reload threads and models", "nbchat-refresh");
  const popBar = node("div", "nbchat-pop-bar");
  popBar.append(search, popNew, popRefresh);
  const threadList = node("ul", "nbchat-threads");
  threadList.setAttribute("role", "listbox");
  threadList.setAttribute("aria-label", "Threads");
  // Delete is away from New: at the foot of the thread list, and it asks first.
  const popFoot = node("div", "nbchat-pop-foot");
  popFoot.appendChild(deleteButton);
  threadsPop.append(popBar, threadList, popFoot);

  // -- conversation
  const scroll = node("div", "nbchat-conversation");
  scroll.setAttribute("role", "log");
  const earlier = button("nbchat-button nbchat-earlier");
  const list = node("div", "nbchat-messages");
  const live = node("div", "nbchat-messages nbchat-live");
  const promptsEl = node("div", "nbchat-prompts");
  const empty = node("div", "nbchat-empty");
  scroll.append(earlier, list, live, promptsEl, empty);

  const status = node("div", "nbchat-status");
  status.setAttribute("role", "status");
  const toolsLine = node("div", "nbchat-status nbchat-dim nbchat-tools-line");

  // -- composer: chips, the box, the bar with model, usage, send/stop
  const composer = node("div", "nbchat-composer");
  const chips = node("div", "nbchat-chips");
  const box = node("textarea", "nbchat-input-box");
  box.rows = 1;
  box.setAttribute("aria-label", "Question");
  box.setAttribute("aria-keyshortcuts", SHORTCUT.replace(/\+/g, "+"));
  const bar = node("div", "nbchat-bar");
  const picker = node("select", "nbchat-model");
  picker.setAttribute("aria-label", "Model");
  picker.title = "Model";
  const attach = node("select", "nbchat-attach");
  attach.setAttribute("aria-label", "Attach a variable");
  attach.title = "Attach a variable to the next question";
  const preview = iconButton("eye", "Preview", "nbchat-preview-button");
  preview.title = "Preview: show the request this question would send; nothing is sent";
  const send = iconButton("send", "Send", "nbchat-send");
  const stop = labelButton("stop", "Stop", "nbchat-stop");
  stop.title = "Stop the answer (Escape)";
  stop.setAttribute("aria-label", "Stop");
  const answering = node("span", "nbchat-answering");
  answering.setAttribute("role", "status");
  answering.append(node("span", "nbchat-pulse"), node("span", "", "Answering…"));
  bar.append(picker, attach, answering, preview, send, stop);
  const field = node("div", "nbchat-field");
  field.append(box, bar);
  composer.append(chips, field);

  // -- the previewed request: HTML made in Python by nbchat.markup, nothing else
  const previewPane = node("div", "nbchat-preview-pane");
  previewPane.setAttribute("role", "region");
  previewPane.setAttribute("aria-label", "Preview of the request");
  const previewClose = button("nbchat-button nbchat-preview-close", "Close preview");
  const previewBody = node("div", "nbchat-preview-body");
  previewPane.append(previewClose, previewBody);

  el.append(header, usage, confirm, threadsPop, scroll, previewPane, status, toolsLine, composer);

  // ---------------------------------------------------------- drawing state
  let filter = "";
  const drawThreads = () => {
    threadList.replaceChildren();
    const current = model.get("thread_id");
    const wanted = filter.toLowerCase();
    for (const thread of model.get("threads")) {
      if (wanted && !thread.label.toLowerCase().includes(wanted)) continue;
      const item = node("li");
      const choose = button("nbchat-thread", thread.label);
      choose.setAttribute("role", "option");
      choose.setAttribute("aria-selected", String(thread.id === current));
      choose.disabled = model.get("streaming");
      choose.addEventListener("click", () => {
        closeThreads();
        if (thread.id !== model.get("thread_id")) intent("select", thread.id);
      });
      item.appendChild(choose);
      threadList.appendChild(item);
    }
    if (!threadList.children.length) {
      threadList.appendChild(node("li", "nbchat-dim", wanted ? "No thread matches." : "No threads yet."));
    }
  };
  const openThreads = () => {
    threadsPop.hidden = false;
    switcher.setAttribute("aria-expanded", "true");
    drawThreads();
    search.focus();
  };
  const closeThreads = () => {
    threadsPop.hidden = true;
    switcher.setAttribute("aria-expanded", "false");
    search.value = ""; // a search ends with its popup: reopened, it lists every thread
    filter = "";
  };

  const drawHeader = () => {
    const id = model.get("thread_id");
    title.textContent = id === null ? "New chat" : model.get("title") || "Untitled";
    title.title = title.textContent; // the full title, however narrow the panel
    title.disabled = id === null;
    rename.disabled = id === null || model.get("streaming");
    deleteButton.disabled = id === null || model.get("streaming");
    newButton.disabled = model.get("streaming");
    switcher.disabled = model.get("streaming");
    const question = model.get("confirm");
    confirm.hidden = !question;
    confirmText.textContent = question;
    confirmYes.textContent = model.get("confirm_action") || "Delete";
  };

  const drawPreview = () => {
    const shown = model.get("preview_html");
    previewPane.hidden = !shown;
    previewBody.innerHTML = shown; // made by nbchat.markup: escaped and sanitized
  };

  const drawGauge = () => {
    const g = model.get("gauge") || {};
    const parts = [];
    const tip = [];
    if (g.used !== undefined) {
      if (g.size) {
        const share = Math.min(1, g.used / g.size);
        gaugeFill.style.width = `${(share * 100).toFixed(1)}%`;
        gauge.classList.toggle("nbchat-full", share > 0.8);
        parts.push(`${Math.round(share * 100)}%`);
        tip.push(`context: ${g.used.toLocaleString()} of ${g.size.toLocaleString()} tokens on the last turn`);
      } else {
        parts.push(`${g.used.toLocaleString()} tok`);
        tip.push(`context: ${g.used.toLocaleString()} tokens on the last turn (the model's size is unknown)`);
      }
      if (g.cached) tip.push(`${g.cached.toLocaleString()} prompt tokens cached`);
    }
    gaugeBar.hidden = !(g.used !== undefined && g.size);
    gauge.hidden = !parts.length;
    gaugeText.textContent = parts.join(" · ");
    gauge.title = tip.join("\n");
    usage.hidden = totals.hidden && gauge.hidden;
  };

  let stick = true; // follow the end of the conversation unless the person scrolled up
  listen(scroll, "scroll", () => {
    stick = scroll.scrollHeight - scroll.scrollTop - scroll.clientHeight < 40;
  });
  const toEnd = () => {
    if (stick) scroll.scrollTop = scroll.scrollHeight;
  };

  const drawMessages = () => {
    const messages = model.get("messages");
    list.replaceChildren(...messages.flatMap((m) => messageNodes(m, model, el)));
    const hidden = model.get("hidden");
    earlier.hidden = !(hidden > 0);
    earlier.textContent = hidden > 0 ? `Show earlier (${hidden} more)` : "";
    drawEmpty();
    replaceEmoji(el);
    toEnd();
  };
  const drawLive = () => {
    const message = model.get("streaming_message") || {};
    live.replaceChildren(...(message.html || message.query ? messageNodes(message, model, el) : []));
    drawEmpty();
    replaceEmoji(live);
    toEnd();
  };
  const drawEmpty = () => {
    const nothing = !model.get("messages").length && !(model.get("streaming_message") || {}).html;
    empty.hidden = !nothing;
    if (!nothing) return;
    empty.replaceChildren(
      node("p", "nbchat-empty-title",
        model.get("thread_id") === null
          ? "No thread selected. Ask something below to start one."
          : "No questions yet in this thread. Ask something below."),
      node("p", "nbchat-dim", "Enter sends, Shift+Enter adds a line, Escape stops, Up recalls."),
      node("p", "nbchat-dim", `Mention a variable with @name to attach it; ${SHORTCUT} comes back here.`),
    );
  };

  const drawStatus = () => {
    status.textContent = model.get("status_text");
    status.className = `nbchat-status nbchat-${model.get("status_kind")}`;
    status.hidden = !model.get("status_text");
    const total = model.get("usage_text");
    totals.replaceChildren();
    totals.hidden = !total;
    usage.hidden = totals.hidden && gauge.hidden;
    // One span a value, so that a narrow panel wraps between values, never inside one.
    (total ? `Σ ${total}` : "").split(" · ").filter(Boolean).forEach((part, n) => {
      if (n) totals.appendChild(document.createTextNode(" · "));
      totals.appendChild(node("span", "nbchat-value", part));
    });
  };

  const drawModels = () => {
    const value = model.get("model");
    picker.replaceChildren(...model.get("models").map((name) => {
      const option = node("option", "", name);
      option.value = name;
      return option;
    }));
    picker.value = value;
    picker.hidden = !model.get("models").length;
  };

  const drawChips = () => {
    chips.replaceChildren();
    const picked = model.get("picked");
    chips.hidden = !picked.length;
    attach.hidden = !model.get("attachable");
    for (const name of picked) {
      const chip = node("span", "nbchat-chip");
      chip.appendChild(node("span", "", `@${name}`));
      const drop = button("nbchat-chip-drop", "×");
      drop.title = `Do not attach ${name}`;
      drop.setAttribute("aria-label", `Do not attach ${name}`);
      drop.addEventListener("click", () => {
        model.set("picked", model.get("picked").filter((n) => n !== name));
        model.save_changes();
      });
      chip.appendChild(drop);
      chips.appendChild(chip);
    }
    const first = node("option", "", "@ Variable");
    first.value = "";
    attach.replaceChildren(first);
    for (const name of model.get("variables")) {
      if (picked.includes(name)) continue;
      const option = node("option", "", name);
      option.value = name;
      attach.appendChild(option);
    }
    attach.value = "";
  };
  listen(attach, "focus", () => intent("variables"));
  listen(attach, "change", () => {
    if (!attach.value) return;
    model.set("picked", [...model.get("picked"), attach.value]);
    model.save_changes();
    drawChips();
  });

  const drawStreaming = () => {
    const streaming = model.get("streaming");
    el.classList.toggle("nbchat-streaming", streaming);
    send.hidden = streaming;
    stop.hidden = !streaming;
    answering.hidden = !streaming;
    drawHeader();
    drawThreads();
  };

  const grow = () => {
    box.style.height = "auto";
    const empty = !box.value;
    if (empty) box.value = box.placeholder; // measured with its text, a wrapped placeholder shows whole
    const wanted = Math.min(box.scrollHeight, 200);
    if (empty) box.value = "";
    box.style.height = `${wanted}px`;
  };

  // ---------------------------------------------------------- prompts: child widgets
  const views = new Map();
  let promptsDone = Promise.resolve();
  const drawPrompts = () => {
    promptsDone = promptsDone.then(async () => {
      const ids = model.get("prompts").map((ref) => String(ref).replace(/^IPY_MODEL_/, ""));
      for (const [id, view] of views) {
        if (!ids.includes(id)) {
          view.remove();
          views.delete(id);
        }
      }
      for (const id of ids) {
        if (views.has(id)) continue;
        const child = await model.widget_manager.get_model(id);
        const view = await model.widget_manager.create_view(child, {});
        views.set(id, view);
        // Attached the Lumino way, so the prompt's widgets get their classes and layout
        // (a plain appendChild leaves every view inside it undisplayed).
        const lumino = view.luminoWidget || view.pWidget;
        if (lumino && typeof lumino.constructor.attach === "function") {
          lumino.constructor.attach(lumino, promptsEl);
        } else {
          promptsEl.appendChild(view.el);
        }
        view.trigger("displayed");
      }
      toEnd();
    }).catch((error) => console.error("nbchat: cannot show a tool prompt", error));
  };

  // ---------------------------------------------------------- the input
  box.value = model.get("value");
  box.placeholder = model.get("placeholder");
  let recalled = -1; // which history entry the box shows, -1: the person's own text
  let composing = false;
  // The text goes to the kernel as a message, not as a state update: ipywidgets
  // holds back state updates while one is unanswered, so a Send could overtake
  // the last keys typed. Messages keep their order.
  const sendValue = () => {
    model.set("value", box.value); // locally only, so that the kernel's "" is a change
    model.send({ event: "value", value: box.value });
  };
  const setValue = (text) => {
    box.value = text;
    grow();
    sendValue();
  };
  const submit = () => {
    if (model.get("streaming") || !box.value.trim()) return;
    recalled = -1;
    stick = true; // the view follows what was just sent, wherever it was scrolled
    scroll.scrollTop = scroll.scrollHeight;
    model.set("value", box.value);
    model.send({ event: "submit", value: box.value });
  };

  listen(box, "input", () => {
    recalled = -1;
    grow();
    sendValue();
  });
  listen(box, "compositionstart", () => { composing = true; });
  listen(box, "compositionend", () => { composing = false; });
  listen(box, "keydown", (event) => {
    // JupyterLab's shortcuts (Shift+Enter runs a cell, Escape leaves edit mode)
    // must not see keys typed here.
    event.stopPropagation();
    // An IME's Enter confirms a character: it must not send (keyCode 229 is
    // what Safari and old Chromium give while composing).
    if (event.isComposing || composing || event.keyCode === 229) return;
    const plain = !event.shiftKey && !event.altKey && !event.ctrlKey && !event.metaKey;
    if (event.key === "Enter" && plain) {
      event.preventDefault();
      submit();
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
      if (box.selectionStart !== box.value.length) return;
      event.preventDefault();
      const history = model.get("history");
      recalled = recalled + 1 < history.length ? recalled + 1 : -1;
      setValue(recalled < 0 ? "" : history[recalled]);
    }
  });
  for (const name of ["keyup", "keypress"]) listen(box, name, (event) => event.stopPropagation());
  // Other keys typed in the panel's own fields stay out of JupyterLab's shortcuts too.
  for (const input of [search, titleEdit]) {
    for (const name of ["keydown", "keyup", "keypress"]) {
      listen(input, name, (event) => event.stopPropagation());
    }
  }

  listen(send, "click", () => {
    submit();
    box.focus();
  });
  listen(preview, "click", () => model.send({ event: "preview", value: box.value }));
  listen(previewClose, "click", () => intent("close_preview"));
  listen(stop, "click", () => {
    model.send({ event: "stop" });
    box.focus();
  });
  listen(picker, "change", () => {
    model.set("model", picker.value);
    model.save_changes();
  });

  // -- header actions
  listen(switcher, "click", () => (threadsPop.hidden ? openThreads() : closeThreads()));
  listen(search, "input", () => {
    filter = search.value;
    drawThreads();
  });
  listen(search, "keydown", (event) => {
    if (event.key === "Escape") {
      closeThreads();
      box.focus();
    } else if (event.key === "Enter") {
      const first = threadList.querySelector("button.nbchat-thread");
      if (first) first.click();
    }
  });
  listen(popNew, "click", () => {
    closeThreads();
    intent("new");
  });
  listen(popRefresh, "click", () => intent("refresh"));
  listen(newButton, "click", () => intent("new"));
  listen(deleteButton, "click", () => {
    closeThreads();
    intent("delete");
  });
  listen(confirmYes, "click", () => intent("confirm_delete"));
  listen(confirmNo, "click", () => intent("cancel_delete"));
  listen(earlier, "click", () => {
    stick = false;
    intent("earlier");
  });
  const startRename = () => {
    if (model.get("thread_id") === null) return;
    titleEdit.value = model.get("title");
    title.hidden = true;
    titleEdit.hidden = false;
    titleEdit.focus();
    titleEdit.select();
  };
  const endRename = (keep) => {
    if (titleEdit.hidden) return;
    titleEdit.hidden = true;
    title.hidden = false;
    const wanted = titleEdit.value.trim();
    if (keep && wanted && wanted !== model.get("title")) intent("rename", wanted);
  };
  listen(title, "click", startRename);
  listen(rename, "click", startRename);
  listen(titleEdit, "keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      endRename(true);
      box.focus();
    } else if (event.key === "Escape") {
      event.preventDefault();
      endRename(false);
    }
  });
  listen(titleEdit, "blur", () => endRename(true));

  // The shortcut that comes back to the input, from anywhere on the page.
  inputs.set(el, box);
  cleanups.push(() => inputs.delete(el));
  if (!shortcut.listening) {
    document.addEventListener("keydown", onShortcut, true);
    shortcut.listening = true;
  }

  const onFocus = () => {
    // Take the focus back from inside the panel (or from nowhere), never from a
    // notebook cell the person moved to meanwhile, unless the panel was just
    // opened on purpose (_focus_steal).
    const active = document.activeElement;
    const steal = model.get("_focus_steal");
    if (steal || !active || active === document.body || el.contains(active)) box.focus();
    if (steal) model.send({ event: "focused" });
  };
  if (model.get("_focus_steal")) requestAnimationFrame(onFocus);

  // ---------------------------------------------------------- following state
  on("change:value", () => {
    if (box.value !== model.get("value")) {
      box.value = model.get("value");
      grow();
    }
  });
  on("change:threads change:thread_id", () => {
    drawHeader();
    drawThreads();
  });
  on("change:title change:confirm change:confirm_action", drawHeader);
  on("change:preview_html", drawPreview);
  on("change:messages change:hidden", drawMessages);
  on("change:streaming_message", drawLive);
  on("change:streaming", drawStreaming);
  on("change:status_text change:status_kind change:usage_text", drawStatus);
  on("change:gauge", drawGauge);
  const drawToolsLine = () => {
    toolsLine.textContent = model.get("tools_line"); // text from the config, never markup
    toolsLine.hidden = !model.get("tools_line");
  };
  on("change:tools_line", drawToolsLine);
  on("change:models change:model", drawModels);
  on("change:variables change:picked change:attachable", drawChips);
  on("change:prompts", drawPrompts);
  on("change:placeholder", () => { box.placeholder = model.get("placeholder"); });
  on("change:_focus", onFocus);

  drawHeader();
  drawThreads();
  drawMessages();
  drawLive();
  drawStatus();
  drawGauge();
  drawPreview();
  drawToolsLine();
  drawModels();
  drawChips();
  drawStreaming();
  drawPrompts();
  requestAnimationFrame(grow);

  // ---------------------------------------------------------- size and polling
  // In the side area the panel fills the height left under it; in a cell it
  // has a height of its own (see _panel.css).
  let widened = false;
  const fit = () => {
    if (model.get("area") !== "side" || el.offsetParent === null) return;
    if (!widened) {
      widened = true;
      widenSide(el);
    }
    const bottom = document.getElementById("jp-bottom-panel");
    const below = bottom ? bottom.getBoundingClientRect().height : 0;
    const height = Math.max(320, window.innerHeight - el.getBoundingClientRect().top - below - 8);
    const wanted = `${Math.floor(height)}px`;
    if (el.style.height !== wanted) el.style.height = wanted;
  };
  listen(window, "resize", () => {
    fit();
    grow();
  });

  // Polling: one question in flight at most, so that a busy kernel never
  // finds a queue of them; none while the panel is hidden. While nothing
  // changes the wait grows, up to four times poll_seconds; a change, or the
  // person using the panel, brings it back.
  let waitingSince = 0;
  let lastPoll = Date.now();
  let slower = 1;
  on("msg:custom", (message) => {
    if (!message || message.event !== "polled") return;
    waitingSince = 0;
    slower = message.changed ? 1 : Math.min(4, slower * 1.5);
  });
  for (const name of ["pointerdown", "keydown", "focusin"]) listen(el, name, () => { slower = 1; });
  const timer = setInterval(() => {
    fit();
    const seconds = model.get("poll_seconds") * slower;
    const now = Date.now();
    if (!(seconds > 0) || now - lastPoll < seconds * 1000) return;
    if (waitingSince && now - waitingSince < 30000) return;
    if (document.hidden || !el.isConnected || el.offsetParent === null) return;
    lastPoll = now;
    waitingSince = now;
    model.send({ event: "poll" });
  }, 250);
  requestAnimationFrame(fit);

  // Text that other widgets (the prompts) put in the panel gets the glyph swap too.
  let observer = null;
  if (emojiReplacements().length) {
    observer = new MutationObserver(() => replaceEmoji(el));
    observer.observe(el, { childList: true, subtree: true, characterData: true });
  }

  return () => {
    clearInterval(timer);
    if (observer) observer.disconnect();
    for (const view of views.values()) view.remove();
    for (const cleanup of cleanups) cleanup();
  };
}

export default { render };
