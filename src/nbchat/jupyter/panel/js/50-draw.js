// ---------------------------------------------------------------- drawing state
// Each draw function puts one part of the kernel's state into the parts of `v`.

function drawThreads(v) {
  const { model, threadList } = v;
  threadList.replaceChildren();
  const current = model.get("thread_id");
  const wanted = v.filter.toLowerCase();
  for (const thread of model.get("threads")) {
    if (wanted && !thread.label.toLowerCase().includes(wanted)) continue;
    const item = node("li");
    const choose = button("nbchat-thread", thread.label);
    choose.setAttribute("role", "option");
    choose.setAttribute("aria-selected", String(thread.id === current));
    choose.disabled = model.get("streaming");
    choose.addEventListener("click", () => {
      closeThreads(v);
      if (thread.id !== model.get("thread_id")) v.intent("select", thread.id);
    });
    item.appendChild(choose);
    threadList.appendChild(item);
  }
  if (!threadList.children.length) {
    threadList.appendChild(node("li", "nbchat-dim", wanted ? "No thread matches." : "No threads yet."));
  }
}

function openThreads(v) {
  v.threadsPop.hidden = false;
  v.switcher.setAttribute("aria-expanded", "true");
  drawThreads(v);
  v.search.focus();
}

function closeThreads(v) {
  v.threadsPop.hidden = true;
  v.switcher.setAttribute("aria-expanded", "false");
  v.search.value = ""; // a search ends with its popup: reopened, it lists every thread
  v.filter = "";
}

function drawHeader(v) {
  const { model, title, rename, deleteButton, newButton, switcher } = v;
  const id = model.get("thread_id");
  title.textContent = id === null ? "New chat" : model.get("title") || "Untitled";
  title.title = title.textContent; // the full title, however narrow the panel
  title.disabled = id === null;
  rename.disabled = id === null || model.get("streaming");
  deleteButton.disabled = id === null || model.get("streaming");
  newButton.disabled = model.get("streaming");
  switcher.disabled = model.get("streaming");
  const question = model.get("confirm");
  v.confirm.hidden = !question;
  v.confirmText.textContent = question;
  v.confirmYes.textContent = model.get("confirm_action") || "Delete";
}

function drawPreview(v) {
  const shown = v.model.get("preview_html");
  v.previewPane.hidden = !shown;
  v.previewBody.innerHTML = shown; // made by nbchat.markup: escaped and sanitized
}

function drawGauge(v) {
  const { gauge, gaugeBar, gaugeFill, gaugeText } = v;
  const g = v.model.get("gauge") || {};
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
  v.usage.hidden = v.totals.hidden && gauge.hidden;
}

// Follows the end of the conversation unless the person scrolled up (v.stick).
// At the next frame, once: reading scrollHeight at once would force a layout per update.
function toEnd(v) {
  if (v.toEndQueued) return;
  v.toEndQueued = true;
  requestAnimationFrame(() => {
    v.toEndQueued = false;
    if (v.stick) v.scroll.scrollTop = v.scroll.scrollHeight;
  });
}

function drawMessages(v) {
  const { model, el, earlier } = v;
  const messages = model.get("messages");
  v.list.replaceChildren(...messages.flatMap((m) => messageNodes(m, model, el)));
  const hidden = model.get("hidden");
  earlier.hidden = !(hidden > 0);
  earlier.textContent = hidden > 0 ? `Show earlier (${hidden} more)` : "";
  drawEmpty(v);
  replaceEmoji(el);
  toEnd(v);
}

function drawLive(v) {
  const { model, el, live } = v;
  const message = model.get("streaming_message") || {};
  const about = JSON.stringify({ ...message, html: null }); // all but the answer so far
  const drawn = v.liveDrawn;
  const body = drawn && drawn.about === about && live.querySelector(".nbchat-body");
  const parsed = parseMarkup(message.html || "");
  if (body) {
    // An update of the same answer: what the stream settled keeps its nodes (and their layout).
    redrawChanged(body, drawn.parsed, parsed, model, el);
  } else {
    live.replaceChildren(...(message.html || message.query ? messageNodes(message, model, el) : []));
    replaceEmoji(live);
  }
  v.liveDrawn = { about, parsed };
  drawEmpty(v);
  toEnd(v);
}

function drawEmpty(v) {
  const { model, empty } = v;
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
}

function drawStatus(v) {
  const { model, status, totals } = v;
  status.textContent = model.get("status_text");
  status.className = `nbchat-status nbchat-${model.get("status_kind")}`;
  status.hidden = !model.get("status_text");
  const total = model.get("usage_text");
  totals.replaceChildren();
  totals.hidden = !total;
  v.usage.hidden = totals.hidden && v.gauge.hidden;
  // One span a value, so that a narrow panel wraps between values, never inside one.
  (total ? `Σ ${total}` : "").split(" · ").filter(Boolean).forEach((part, n) => {
    if (n) totals.appendChild(document.createTextNode(" · "));
    totals.appendChild(node("span", "nbchat-value", part));
  });
}

function drawModels(v) {
  const { model, picker } = v;
  const value = model.get("model");
  const option = (name) => {
    const made = node("option", "", name);
    made.value = name;
    return made;
  };
  const groups = model.get("model_groups");
  if (groups.length > 1) {
    // One group per connected endpoint; a model listed by two is offered by the first.
    const seen = new Set();
    picker.replaceChildren(...groups.map((group) => {
      const made = node("optgroup");
      made.label = group.error ? `${group.label} (${group.error})` : group.label;
      made.append(...group.models.filter((m) => !seen.has(m) && seen.add(m)).map(option));
      return made;
    }));
    model.get("models").filter((m) => !seen.has(m)).forEach((m) => picker.append(option(m)));
  } else {
    picker.replaceChildren(...model.get("models").map(option));
  }
  picker.value = value;
  picker.hidden = !model.get("models").length || Boolean(model.get("agent"));
}

function drawMode(v) {
  const agent = v.model.get("agent");
  v.modePicker.value = v.model.get("mode");
  v.modePicker.disabled = v.model.get("streaming");
  v.modePicker.hidden = Boolean(agent);  // an agent has modes of its own
}

// Who answers: nbchat's model, or a coding agent (names and labels are set as text).
function drawAgents(v) {
  const { model, agentPicker } = v;
  const agents = model.get("agents");
  const option = (value, label) => {
    const made = node("option", "", label);
    made.value = value;
    return made;
  };
  agentPicker.replaceChildren(option("", "nbchat"),
    ...agents.map((a) => option(a.name, a.label || a.name)));
  agentPicker.value = model.get("agent");
  agentPicker.hidden = !agents.length;
  agentPicker.disabled = model.get("streaming");
  v.picker.hidden = Boolean(model.get("agent")) || !model.get("models").length;
}

function drawChips(v) {
  const { model, chips, attach } = v;
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
}

function drawStreaming(v) {
  const streaming = v.model.get("streaming");
  v.el.classList.toggle("nbchat-streaming", streaming);
  v.send.hidden = streaming;
  v.stop.hidden = !streaming;
  v.answering.hidden = !streaming;
  drawHeader(v);
  drawThreads(v);
}

function drawToolsLine(v) {
  const { model, toolsLine } = v;
  toolsLine.textContent = model.get("tools_line"); // text from the config, never markup
  toolsLine.hidden = !model.get("tools_line");
}

function grow(v) {
  const { box } = v;
  box.style.height = "auto";
  const empty = !box.value;
  if (empty) box.value = box.placeholder; // measured with its text, a wrapped placeholder shows whole
  const wanted = Math.min(box.scrollHeight, 200);
  if (empty) box.value = "";
  box.style.height = `${wanted}px`;
}
