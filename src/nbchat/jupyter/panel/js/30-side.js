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

// In the side area the panel fills the height left under it; in a cell it
// has a height of its own (see css/00-panel.css).
function fit(v) {
  const { model, el } = v;
  if (model.get("area") !== "side" || el.offsetParent === null) return;
  if (!v.widened) {
    v.widened = true;
    widenSide(el);
  }
  const bottom = document.getElementById("jp-bottom-panel");
  const below = bottom ? bottom.getBoundingClientRect().height : 0;
  const height = Math.max(320, window.innerHeight - el.getBoundingClientRect().top - below - 8);
  const wanted = `${Math.floor(height)}px`;
  if (el.style.height !== wanted) el.style.height = wanted;
}
