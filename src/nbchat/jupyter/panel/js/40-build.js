// ---------------------------------------------------------------- building the panel
// Each part of the panel is made once; what changes is drawn into it (50-draw.js).

// -- header: switcher, title, gauge, new, delete
function buildHeader() {
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
  return {
    header, switcher, title, rename, titleEdit, gauge, gaugeBar, gaugeFill, gaugeText,
    newButton, deleteButton, usage, totals,
  };
}

function buildConfirm() {
  const confirm = node("div", "nbchat-confirm");
  const confirmText = node("span");
  const confirmYes = button("nbchat-button nbchat-danger", "Delete");
  const confirmNo = button("nbchat-button", "Cancel");
  confirm.append(confirmText, confirmYes, confirmNo);
  return { confirm, confirmText, confirmYes, confirmNo };
}

// -- the threads popup: search, new, reload, the list, and delete at its foot
function buildThreads(deleteButton) {
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
  const popConnect = labelButton("plug", "Connect a model…", "nbchat-connect");
  popConnect.title = "Connect a model: its key is kept once, for every kernel";
  popFoot.append(popConnect, deleteButton);
  threadsPop.append(popBar, threadList, popFoot);
  return { threadsPop, search, popNew, popRefresh, popConnect, threadList };
}

// -- conversation, and the status lines under it
function buildConversation() {
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
  return { scroll, earlier, list, live, promptsEl, empty, status, toolsLine };
}

// -- composer: chips, the box, the bar with model, usage, send/stop
function buildComposer() {
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
  const modePicker = node("select", "nbchat-mode");
  modePicker.setAttribute("aria-label", "Mode");
  modePicker.title = "Chat, or let the model read and change this notebook: every change " +
    "a proposal you accept (ask), reads only (plan), or changes land, undoable (accept edits)";
  for (const [value, label] of [["chat", "Chat"], ["ask", "Agent: ask"], ["plan", "Agent: plan"],
                                ["accept-edits", "Agent: accept edits"]]) {
    const option = node("option", "", label);
    option.value = value;
    modePicker.append(option);
  }
  const agentPicker = node("select", "nbchat-agent");
  agentPicker.setAttribute("aria-label", "Who answers");
  agentPicker.title = "Who answers: nbchat's model, or your coding agent (every permission it " +
    "asks waits for your answer here)";
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
  bar.append(agentPicker, picker, modePicker, attach, answering, preview, send, stop);
  const field = node("div", "nbchat-field");
  field.append(box, bar);
  composer.append(chips, field);
  return {
    composer, chips, box, picker, modePicker, agentPicker, attach, preview, send, stop, answering,
  };
}

// -- the previewed request: HTML made in Python by nbchat.markup, nothing else
function buildPreview() {
  const previewPane = node("div", "nbchat-preview-pane");
  previewPane.setAttribute("role", "region");
  previewPane.setAttribute("aria-label", "Preview of the request");
  const previewClose = button("nbchat-button nbchat-preview-close", "Close preview");
  const previewBody = node("div", "nbchat-preview-body");
  previewPane.append(previewClose, previewBody);
  return { previewPane, previewClose, previewBody };
}

// The panel's parts, put in `el`, with the state its drawing keeps: `v`, which
// every draw and wire function takes.
function buildView(model, el) {
  const v = { model, el, ...buildHeader(), ...buildConfirm() };
  Object.assign(v, buildThreads(v.deleteButton), buildConversation());
  Object.assign(v, buildComposer(), buildPreview());
  el.append(v.header, v.usage, v.confirm, v.threadsPop, v.scroll, v.previewPane, v.status,
            v.toolsLine, v.composer);
  v.filter = ""; // what the threads popup's search keeps
  v.stick = true; // follow the end of the conversation unless the person scrolled up
  v.recalled = -1; // which history entry the box shows, -1: the person's own text
  v.composing = false;
  v.views = new Map(); // the prompts' child widget views, by model id
  v.promptsDone = Promise.resolve();
  v.widened = false;
  return v;
}
