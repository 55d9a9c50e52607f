// ---------------------------------------------------------------- the input
// What the person does, sent to the kernel: typed text, keys, and the buttons.

// The text goes to the kernel as a message, not as a state update: ipywidgets
// holds back state updates while one is unanswered, so a Send could overtake
// the last keys typed. Messages keep their order.
function sendValue(v) {
  v.model.set("value", v.box.value); // locally only, so that the kernel's "" is a change
  v.model.send({ event: "value", value: v.box.value });
}

function setValue(v, text) {
  v.box.value = text;
  grow(v);
  sendValue(v);
}

function submit(v) {
  const { model, box, scroll } = v;
  if (model.get("streaming") || !box.value.trim()) return;
  v.recalled = -1;
  v.stick = true; // the view follows what was just sent, wherever it was scrolled
  scroll.scrollTop = scroll.scrollHeight;
  model.set("value", box.value);
  model.send({ event: "submit", value: box.value });
}

function onKey(v, event) {
  const { model, box } = v;
  // JupyterLab's shortcuts (Shift+Enter runs a cell, Escape leaves edit mode)
  // must not see keys typed here.
  event.stopPropagation();
  // An IME's Enter confirms a character: it must not send (keyCode 229 is
  // what Safari and old Chromium give while composing).
  if (event.isComposing || v.composing || event.keyCode === 229) return;
  const plain = !event.shiftKey && !event.altKey && !event.ctrlKey && !event.metaKey;
  if (event.key === "Enter" && plain) {
    event.preventDefault();
    submit(v);
  } else if (event.key === "Escape" && model.get("streaming")) {
    event.preventDefault();
    model.send({ event: "stop" });
  } else if (event.key === "ArrowUp" && plain) {
    const history = model.get("history");
    const atStart = box.selectionStart === 0 && box.selectionEnd === 0;
    if (!history.length || !(box.value === "" || (v.recalled >= 0 && atStart))) return;
    event.preventDefault();
    v.recalled = v.recalled < 0 ? history.length - 1 : Math.max(0, v.recalled - 1);
    setValue(v, history[v.recalled]);
    box.setSelectionRange(0, 0);
  } else if (event.key === "ArrowDown" && plain && v.recalled >= 0) {
    if (box.selectionStart !== box.value.length) return;
    event.preventDefault();
    const history = model.get("history");
    v.recalled = v.recalled + 1 < history.length ? v.recalled + 1 : -1;
    setValue(v, v.recalled < 0 ? "" : history[v.recalled]);
  }
}

function wireInput(v) {
  const { model, box, listen } = v;
  box.value = model.get("value");
  box.placeholder = model.get("placeholder");
  listen(box, "input", () => {
    v.recalled = -1;
    grow(v);
    sendValue(v);
  });
  listen(box, "compositionstart", () => { v.composing = true; });
  listen(box, "compositionend", () => { v.composing = false; });
  listen(box, "keydown", (event) => onKey(v, event));
  for (const name of ["keyup", "keypress"]) listen(box, name, (event) => event.stopPropagation());
  // Other keys typed in the panel's own fields stay out of JupyterLab's shortcuts too.
  for (const input of [v.search, v.titleEdit]) {
    for (const name of ["keydown", "keyup", "keypress"]) {
      listen(input, name, (event) => event.stopPropagation());
    }
  }
}

// The variables to attach to the next question.
function wireChips(v) {
  const { model, attach, listen } = v;
  listen(attach, "focus", () => v.intent("variables"));
  listen(attach, "change", () => {
    if (!attach.value) return;
    model.set("picked", [...model.get("picked"), attach.value]);
    model.save_changes();
    drawChips(v);
  });
}

function wireComposer(v) {
  const { model, box, picker, listen, intent } = v;
  listen(v.send, "click", () => {
    submit(v);
    box.focus();
  });
  listen(v.preview, "click", () => model.send({ event: "preview", value: box.value }));
  listen(v.previewClose, "click", () => intent("close_preview"));
  listen(v.stop, "click", () => {
    model.send({ event: "stop" });
    box.focus();
  });
  listen(picker, "change", () => {
    model.set("model", picker.value);
    model.save_changes();
  });
  listen(v.modePicker, "change", () => {
    model.set("mode", v.modePicker.value);
    model.save_changes();
  });
  listen(v.agentPicker, "change", () => {
    model.set("agent", v.agentPicker.value);
    model.save_changes();
  });
}

function wireConversation(v) {
  const { scroll } = v;
  v.listen(scroll, "scroll", () => {
    v.stick = scroll.scrollHeight - scroll.scrollTop - scroll.clientHeight < 40;
  });
}

// -- header actions
function wireHeader(v) {
  const { search, threadsPop, listen, intent } = v;
  listen(v.switcher, "click", () => (threadsPop.hidden ? openThreads(v) : closeThreads(v)));
  listen(search, "input", () => {
    v.filter = search.value;
    drawThreads(v);
  });
  listen(search, "keydown", (event) => {
    if (event.key === "Escape") {
      closeThreads(v);
      v.box.focus();
    } else if (event.key === "Enter") {
      const first = v.threadList.querySelector("button.nbchat-thread");
      if (first) first.click();
    }
  });
  listen(v.popNew, "click", () => {
    closeThreads(v);
    intent("new");
  });
  listen(v.popRefresh, "click", () => intent("refresh"));
  listen(v.popConnect, "click", () => {
    closeThreads(v);
    // JupyterLab's nbchat extension opens its dialog and takes the event; elsewhere the
    // kernel says how to connect from a terminal.
    const event = new CustomEvent("nbchat:connect", { cancelable: true });
    if (document.dispatchEvent(event)) intent("connect_elsewhere");
  });
  listen(v.newButton, "click", () => intent("new"));
  listen(v.deleteButton, "click", () => {
    closeThreads(v);
    intent("delete");
  });
  listen(v.confirmYes, "click", () => intent("confirm_delete"));
  listen(v.confirmNo, "click", () => intent("cancel_delete"));
  listen(v.earlier, "click", () => {
    v.stick = false;
    intent("earlier");
  });
}

function wireRename(v) {
  const { model, title, titleEdit, listen } = v;
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
    if (keep && wanted && wanted !== model.get("title")) v.intent("rename", wanted);
  };
  listen(title, "click", startRename);
  listen(v.rename, "click", startRename);
  listen(titleEdit, "keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      endRename(true);
      v.box.focus();
    } else if (event.key === "Escape") {
      event.preventDefault();
      endRename(false);
    }
  });
  listen(titleEdit, "blur", () => endRename(true));
}

function onFocus(v) {
  // Take the focus back from inside the panel (or from nowhere), never from a
  // notebook cell the person moved to meanwhile, unless the panel was just
  // opened on purpose (_focus_steal).
  const { model, el } = v;
  const active = document.activeElement;
  const steal = model.get("_focus_steal");
  if (steal || !active || active === document.body || el.contains(active)) v.box.focus();
  if (steal) model.send({ event: "focused" });
}

// The shortcut that comes back to the input, from anywhere on the page.
function wireShortcut(v) {
  inputs.set(v.el, v.box);
  v.cleanups.push(() => inputs.delete(v.el));
  if (!shortcut.listening) {
    document.addEventListener("keydown", onShortcut, true);
    shortcut.listening = true;
  }
}
