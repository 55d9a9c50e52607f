// ---------------------------------------------------------------- prompts: child widgets
// The tool prompts are widgets of their own (model ids in the `prompts` trait),
// drawn one after another: each draw waits for the one before it.

function drawPrompts(v) {
  const { model, views } = v;
  v.promptsDone = v.promptsDone.then(async () => {
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
        lumino.constructor.attach(lumino, v.promptsEl);
      } else {
        v.promptsEl.appendChild(view.el);
      }
      view.trigger("displayed");
    }
    toEnd(v);
  }).catch((error) => console.error("nbchat: cannot show a tool prompt", error));
}
