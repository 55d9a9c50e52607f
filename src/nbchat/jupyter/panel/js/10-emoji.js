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
  if (!emojiReplacements().length || !root) return;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement && n.parentElement.closest("textarea, input")) continue;
    const text = withDrawnEmoji(n.nodeValue);
    if (text !== n.nodeValue) n.nodeValue = text;
  }
}

function withDrawnEmoji(text) {
  for (const [emoji, glyph] of emojiReplacements()) {
    if (text.includes(emoji)) text = text.split(emoji).join(glyph);
  }
  return text;
}
