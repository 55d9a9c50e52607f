/**
 * The model's waiting cell changes, drawn in the notebook where they land, and
 * the person's answers sent back to the kernel.
 *
 * The kernel sends `{op: "proposals", proposals: [...]}` on the `nbchat.notebook`
 * comm: the whole list each time, so what a list no longer holds is taken away.
 * An edit is a read-only CodeMirror unified merge view on its cell, with a toggle
 * per chunk (numbered as the kernel numbers them: the kernel lands exactly the
 * chunks named); an insert is a ghost block between the cells; a delete, a move
 * or a run is a bar on the cell. An answer is `{op: "answer", thread, call_id,
 * value}`; the kernel then changes the cell itself, so nothing here ever touches
 * the notebook's model (nothing drawn is saved in the .ipynb).
 *
 * While the model writes an edit, the kernel sends `{op: "streaming", thread, call_id,
 * cell_id, proposed}` (the new source so far, a few times a second) and, once the turn's
 * events end, `{op: "streamed", call_ids}`: the growing text is drawn on its cell with
 * its new lines marked, to read only (no answer can be given to it); the stored proposal,
 * when the list brings it, takes its place, and the end takes away whatever it did not.
 *
 * An edit is drawn in two steps: at once its new text with the changed lines marked, then,
 * once that frame is painted and the page is idle, the merge view with its deleted lines and
 * chunk toggles.
 *
 * Every text from the kernel (why, base, proposed) is data: it enters the page as
 * textContent or as a CodeMirror document, never as markup.
 */
import { Cell } from '@jupyterlab/cells';
import { CodeMirrorEditor, jupyterHighlightStyle, jupyterTheme } from '@jupyterlab/codemirror';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Change, diff, presentableDiff, unifiedMergeView } from '@codemirror/merge';
import { Language, language, syntaxHighlighting } from '@codemirror/language';
import { EditorState, Extension, RangeSetBuilder, StateField, Text } from '@codemirror/state';
import {
  Decoration,
  DecorationSet,
  EditorView,
  ViewPlugin,
  ViewUpdate,
  WidgetType,
  highlightSpecialChars
} from '@codemirror/view';
import { PanelLayout, Widget } from '@lumino/widgets';

/** One waiting change as the kernel describes it (offsets in characters, as Python counts them). */
export interface Proposal {
  thread: number;
  turn: number;
  call_id: string;
  tool: Tool;
  cell_id: string;
  index: number | null;
  cell_type: string;
  why: string;
  base: string;
  proposed: string;
  chunks: KernelChunk[];
}

interface KernelChunk {
  number: number;
  from_a: number;
  to_a: number;
  from_b: number;
  to_b: number;
}

type Tool = 'edit_cell' | 'insert_cell' | 'delete_cell' | 'move_cell' | 'execute_cell';
type Value = 'accept' | 'reject' | { action: 'accept'; chunks: number[] };

/** An edit as the model writes it, or the end of the ones streamed in a turn. */
type Streaming =
  | { op: 'streaming'; thread: number | null; call_id: string; cell_id: string; proposed: string }
  | { op: 'streamed'; call_ids: string[] };

/** What the view sends; the bridge adds the page's `client`. */
export type Answer = { op: 'answer'; thread: number; call_id: string; value: Value };
export type Send = (answer: Answer) => void;

const TOOLS: Tool[] = ['edit_cell', 'insert_cell', 'delete_cell', 'move_cell', 'execute_cell'];

/** Characters that draw nothing or reorder the text, shown as CodeMirror's special-character marks. */
const HIDDEN = /[\u00ad\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/;
const HIDDEN_ALL = new RegExp(HIDDEN.source, 'g');

const VIEWS = new WeakMap<NotebookPanel, ProposalsView>();

/** The proposals drawn in one notebook panel; one per panel, whichever comm feeds it. */
export class ProposalsView {
  private readonly drawn = new Map<string, Drawing>();
  private readonly streaming = new Map<string, StreamingEdit>(); // being written: to read only
  private list: Proposal[] = [];
  private send: Send | null = null;
  private readonly bar: TurnBar;
  private scheduled = false;
  private focusCell: string | null = null; // the next proposal on it takes the keyboard

  static for(panel: NotebookPanel): ProposalsView {
    let view = VIEWS.get(panel);
    if (!view) {
      view = new ProposalsView(panel);
      VIEWS.set(panel, view);
    }
    return view;
  }

  private constructor(private readonly panel: NotebookPanel) {
    this.bar = new TurnBar(this);
    panel.disposed.connect(() => this.clear());
    panel.content.model?.cells.changed.connect(() => this.schedule());
    panel.sessionContext.kernelChanged.connect(() => this.clear());
    panel.sessionContext.statusChanged.connect((_, status) => {
      if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
        this.clear(); // that kernel's proposals are gone with it
      }
    });
  }

  /** Send answers through `send` from now on; returns the call that stops it (the comm closed). */
  connect(send: Send): () => void {
    this.send = send;
    return () => {
      if (this.send === send) {
        this.send = null;
        this.clear();
      }
    };
  }

  /** Draw the kernel's whole list: new ones drawn, gone ones removed, the rest kept as they are. */
  show(proposals: unknown): void {
    this.list = Array.isArray(proposals) ? proposals.filter(isProposal) : [];
    const keys = new Set(this.list.map(keyOf));
    for (const [key, drawing] of this.drawn) {
      if (!keys.has(key) || drawing.signature !== JSON.stringify(this.list.find(p => keyOf(p) === key))) {
        drawing.dispose();
        this.drawn.delete(key);
      }
    }
    for (const proposal of this.list) {
      const key = keyOf(proposal);
      this.endStreaming(key); // the stored proposal takes the place of its streamed drawing
      const drawing = this.drawn.get(key);
      if (drawing) {
        drawing.enable(); // an answer that did not land (a stale proposal) may be given again
      } else {
        const made = new Drawing(proposal, this.panel, value => this.answer(proposal, value));
        this.drawn.set(key, made);
        if (proposal.cell_id && proposal.cell_id === this.focusCell) {
          this.focusCell = null;
          requestAnimationFrame(() => made.focus());
        }
      }
    }
    this.render();
  }

  /** Draw an edit as the model writes it (never to answer), or end the ones streamed. */
  stream(message: unknown): void {
    const data = message as Streaming;
    if (data?.op === 'streamed') {
      const ids = new Set(Array.isArray(data.call_ids) ? data.call_ids : []);
      [...this.streaming].filter(([, edit]) => ids.has(edit.callId)).forEach(([key]) => this.endStreaming(key));
      return;
    }
    if (!isStreaming(data)) {
      return;
    }
    const key = `${data.thread}:${data.call_id}`;
    const cell = cellOf(this.panel, data.cell_id);
    if (this.drawn.has(key) || !cell || this.panel.isDisposed) {
      return; // stored already (that one is answered), or not a cell of this notebook
    }
    let edit = this.streaming.get(key);
    if (!edit) {
      edit = new StreamingEdit(this.panel, cell, data.call_id);
      this.streaming.set(key, edit);
    }
    edit.grow(data.proposed);
    edit.place(() => this.schedule());
  }

  private endStreaming(key: string): void {
    this.streaming.get(key)?.dispose();
    this.streaming.delete(key);
  }

  /** The next proposal drawn on cell `cellId` takes the keyboard (asked in that cell). */
  focusNext(cellId: string): void {
    this.focusCell = cellId;
  }

  clear(): void {
    [...this.streaming.keys()].forEach(key => this.endStreaming(key));
    this.show([]);
  }

  get count(): number {
    return this.list.length;
  }

  /** One answer per waiting proposal, oldest first. */
  answerAll(value: 'accept' | 'reject'): void {
    for (const proposal of this.list) {
      this.answer(proposal, value);
    }
  }

  private answer(proposal: Proposal, value: Value): void {
    this.drawn.get(keyOf(proposal))?.disable();
    this.send?.({ op: 'answer', thread: proposal.thread, call_id: proposal.call_id, value });
  }

  private schedule(): void {
    if (!this.scheduled) {
      this.scheduled = true;
      requestAnimationFrame(() => {
        this.scheduled = false;
        this.render();
      });
    }
  }

  /** Put each drawing where it lands now (cells move, come and go), and the turn bar. */
  private render(): void {
    if (this.panel.isDisposed) {
      return;
    }
    for (const drawing of this.drawn.values()) {
      drawing.place(() => this.schedule());
    }
    for (const edit of this.streaming.values()) {
      edit.place(() => this.schedule());
    }
    this.bar.refresh(this.panel);
    // All the reads, then all the writes: one layout for the views in sight, made now.
    const editors = [...this.drawn.values()].flatMap(d => d.editors).filter(e => !e.isMade && !e.isDisposed);
    editors.filter(e => e.isNearWindow()).forEach(e => e.realize());
  }
}

/** Accept all / Reject all, at the top of the panel, when more than one proposal waits. */
class TurnBar extends Widget {
  private readonly label: HTMLElement;

  constructor(private readonly view: ProposalsView) {
    super();
    this.addClass('nbchat-proposals-bar');
    this.label = this.node.appendChild(document.createElement('span'));
    this.label.className = 'nbchat-proposals-bar-label';
    this.node.appendChild(button('Accept all', 'nbchat-accept', () => view.answerAll('accept')));
    this.node.appendChild(button('Reject all', 'nbchat-reject', () => view.answerAll('reject')));
  }

  refresh(panel: NotebookPanel): void {
    const count = this.view.count;
    if (count > 1) {
      this.label.textContent = `${count} proposed changes wait for your answer`;
      if (this.parent !== panel.contentHeader) {
        panel.contentHeader.addWidget(this);
      }
    } else if (this.parent) {
      this.parent = null;
    }
  }
}

type Where = 'top' | 'after-input' | 'bottom';
type Spot = { cell: Cell; where: Where } | null;

/** The widgets one proposal draws, and where each goes. */
class Drawing {
  readonly signature: string;
  private readonly parts: { make: () => Widget; widget: Widget; spot: () => Spot }[] = [];
  private readonly buttons: HTMLButtonElement[] = [];
  readonly editors: EditorWidget[] = [];
  private answered = false; // sent, the kernel's next list not yet come
  private marked: { cell: Cell; name: string } | null = null;

  constructor(
    private readonly proposal: Proposal,
    private readonly panel: NotebookPanel,
    private readonly answer: (value: Value) => void
  ) {
    this.signature = JSON.stringify(proposal);
    const onCell = (): Spot => {
      const cell = cellOf(panel, proposal.cell_id);
      return cell ? { cell, where: 'after-input' } : null;
    };
    switch (proposal.tool) {
      case 'edit_cell':
        this.add(() => this.editView(), onCell);
        break;
      case 'insert_cell':
        this.add(() => this.ghost(), () => slot(panel, proposal.index ?? panel.content.widgets.length));
        break;
      case 'delete_cell':
        this.add(() => this.bar('Delete this cell?', 'Accept'), onCell);
        break;
      case 'move_cell':
        this.add(() => this.bar(`Move this cell to position ${proposal.index}?`, 'Accept'), onCell);
        this.add(() => this.gap(), () => this.moveSlot());
        break;
      case 'execute_cell':
        this.add(() => this.bar('Run this cell?', 'Run'), onCell);
        break;
    }
  }

  private add(make: () => Widget, spot: () => Spot): void {
    this.parts.push({ make, widget: this.made(make), spot });
  }

  private made(make: () => Widget): Widget {
    const widget = make();
    this.buttons.forEach(b => (b.disabled = this.answered));
    widget.addClass('nbchat-proposal');
    widget.node.dataset.nbchatCall = this.proposal.call_id;
    widget.node.dataset.nbchatTool = this.proposal.tool;
    // The notebook would take a press here for a cell selection or a drag.
    widget.node.addEventListener('mousedown', event => event.stopPropagation());
    // Focused (asked in its cell, or tabbed to): Enter or Tab accepts, Escape rejects.
    widget.node.tabIndex = 0;
    widget.node.addEventListener('keydown', event => this.onKey(event, widget));
    return widget;
  }

  private onKey(event: KeyboardEvent, widget: Widget): void {
    const name = event.key === 'Escape' ? '.nbchat-reject' : event.key === 'Enter' || event.key === 'Tab' ? '.nbchat-accept' : null;
    if (!name || event.isComposing || event.shiftKey || event.altKey || event.ctrlKey || event.metaKey) {
      return;
    }
    if (event.key === 'Enter' && (event.target as HTMLElement).tagName === 'BUTTON') {
      return; // the button's own Enter clicks it
    }
    event.preventDefault();
    event.stopPropagation(); // not the notebook's command mode keys
    widget.node.querySelector<HTMLButtonElement>(`.nbchat-proposal-actions ${name}`)?.click();
  }

  /** Give the keyboard to the first part of the drawing (its cell's proposal). */
  focus(): void {
    const widget = this.parts[0]?.widget;
    if (widget && !widget.isDisposed && widget.isAttached) {
      widget.node.focus({ preventScroll: false });
    }
  }

  /** Attach each part to its cell (once the cell is rendered); `later` when one is not yet. */
  place(later: () => void): void {
    for (const part of this.parts) {
      if (part.widget.isDisposed) {
        // Its cell was disposed with it (JupyterLab makes a moved cell anew): draw it again.
        part.widget = this.made(part.make);
      }
      const spot = part.spot();
      if (!spot || spot.cell.isDisposed) {
        part.widget.parent = null;
      } else if (spot.cell.isPlaceholder()) {
        void spot.cell.ready.then(later);
      } else {
        attach(spot.cell, part.widget, spot.where);
      }
    }
    this.mark();
  }

  enable(): void {
    this.answered = false;
    this.buttons.forEach(b => (b.disabled = false));
  }

  disable(): void {
    this.answered = true;
    this.buttons.forEach(b => (b.disabled = true));
  }

  dispose(): void {
    for (const part of this.parts) {
      part.widget.dispose();
    }
    this.marked?.cell.removeClass(this.marked.name);
    this.marked = null;
  }

  /** The class the target cell wears while the proposal waits. */
  private mark(): void {
    const names: { [tool: string]: string } = {
      edit_cell: 'nbchat-mod-edit-proposed',
      delete_cell: 'nbchat-mod-delete-proposed',
      move_cell: 'nbchat-mod-move-proposed',
      execute_cell: 'nbchat-mod-run-proposed'
    };
    const name = names[this.proposal.tool];
    const cell = name ? cellOf(this.panel, this.proposal.cell_id) : null;
    if (this.marked && this.marked.cell !== cell) {
      this.marked.cell.removeClass(this.marked.name);
      this.marked = null;
    }
    if (cell && name) {
      cell.addClass(name);
      this.marked = { cell, name };
    }
  }

  private moveSlot(): Spot {
    const cells = this.panel.content.widgets;
    const from = cells.findIndex(c => c.model.id === this.proposal.cell_id);
    const to = this.proposal.index ?? 0;
    if (from < 0 || to === from || to < 0 || to >= cells.length) {
      return null;
    }
    return { cell: cells[to], where: to > from ? 'bottom' : 'top' }; // lands after it, or before it
  }

  private header(label: string): HTMLElement {
    const head = document.createElement('div');
    head.className = 'nbchat-proposal-head';
    const title = head.appendChild(document.createElement('span'));
    title.className = 'nbchat-proposal-title';
    title.textContent = label;
    if (this.proposal.why) {
      const why = head.appendChild(document.createElement('span'));
      why.className = 'nbchat-proposal-why';
      why.textContent = this.proposal.why;
    }
    return head;
  }

  private actions(yes: string, accept: () => Value): HTMLElement {
    const row = document.createElement('div');
    row.className = 'nbchat-proposal-actions';
    const ok = button(yes, 'nbchat-accept', () => this.answer(accept()));
    const no = button('Reject', 'nbchat-reject', () => this.answer('reject'));
    this.buttons.push(ok, no);
    row.append(ok, no);
    return row;
  }

  private bar(question: string, yes: string): Widget {
    const widget = new Widget();
    widget.addClass('nbchat-proposal-bar');
    widget.node.append(this.header(question), this.actions(yes, () => 'accept'));
    return widget;
  }

  private ghost(): Widget {
    const p = this.proposal;
    const widget = new EditorWidget(
      () => EditorState.create({ doc: p.proposed, extensions: [...readOnly(), languageFor(this.panel, p.cell_type)] }),
      lineCount(p.proposed)
    );
    this.editors.push(widget);
    widget.addClass('nbchat-ghost-cell');
    const where = p.index === null ? 'at the end' : `at position ${p.index}`;
    widget.node.prepend(this.header(`New ${p.cell_type} cell ${where}?`));
    widget.node.append(this.actions('Accept', () => 'accept'));
    return widget;
  }

  private gap(): Widget {
    const widget = new Widget();
    widget.addClass('nbchat-move-gap');
    widget.node.textContent = 'The cell would move here';
    return widget;
  }

  private editView(): Widget {
    const p = this.proposal;
    const selected = new Set<number>();
    const chunks = p.chunks.map(c => toUtf16(c, p.base, p.proposed));
    const language = languageFor(this.panel, p.cell_type, cellOf(this.panel, p.cell_id));
    // First the new text with its chunks' lines marked (cheap: no diff, no deleted lines)...
    const quick = () => EditorState.create({ doc: p.proposed, extensions: [...readOnly(), language, chunkLines(chunks)] });
    // ...then, once that is painted, the merge view.
    const make = () => EditorState.create({
      doc: p.proposed,
      extensions: [
        ...readOnly(),
        language,
        unifiedMergeView({
          original: Text.of(p.base.split('\n')),
          mergeControls: false,
          highlightChanges: true,
          gutter: true,
          diffConfig: { override: (a, b) => (a === p.base && b === p.proposed ? changesOf(chunks, a, b) : diff(a, b)) }
        }),
        chunkToggles(chunks, selected, () => update()),
        EditorView.updateListener.of(update => markHidden(update.view.dom))
      ]
    });
    // Deleted lines show above the new ones: both count in the height kept for the view.
    const lines = lineCount(p.proposed) + chunks.reduce((n, c) => n + lineCount(p.base.slice(c.from_a, c.to_a)), 0);
    const widget = new EditorWidget(make, lines + chunks.length, quick);
    this.editors.push(widget);
    widget.addClass('nbchat-merge');
    widget.node.prepend(this.header(`Proposed edit: ${chunks.length} chunk${chunks.length === 1 ? '' : 's'}`));
    const chosen = () => chunks.map(c => c.number).filter(n => selected.has(n));
    widget.node.append(
      this.actions('Accept', () => {
        const some = chosen();
        return some.length === 0 || some.length === chunks.length ? 'accept' : { action: 'accept', chunks: some };
      })
    );
    const accept = this.buttons[this.buttons.length - 2];
    const update = () => {
      const some = chosen();
      accept.textContent =
        some.length === 0 || some.length === chunks.length ? 'Accept' : `Accept chunk${some.length > 1 ? 's' : ''} ${some.join(', ')}`;
    };
    return widget;
  }
}

/** How far outside the window a view is made before it is scrolled to. */
const MARGIN = 600;

/**
 * A read-only CodeMirror view as a Lumino widget, made only once it is near the
 * window (fifty proposals in a long notebook cost only the few in sight); until
 * then a block of about its height holds its place. Destroyed with the widget. With
 * `quick`, that cheaper state is drawn first and `make`'s takes its place in the idle
 * time after the frame that shows it.
 */
class EditorWidget extends Widget {
  private view: EditorView | null = null;
  private readonly slot: HTMLElement;
  private watcher: IntersectionObserver | null = null;

  constructor(
    private readonly make: () => EditorState,
    lines: number,
    private quick: (() => EditorState) | null = null
  ) {
    super();
    this.slot = this.node.appendChild(document.createElement('div'));
    this.slot.className = 'nbchat-editor-slot';
    this.slot.style.height = `calc(${lines} * var(--jp-code-line-height, 1.4) * var(--jp-code-font-size, 13px) + 8px)`;
  }

  get isMade(): boolean {
    return this.view !== null;
  }

  /** Whether the widget is in the page and within `MARGIN` of the window (reads layout). */
  isNearWindow(): boolean {
    if (!this.isAttached) {
      return false;
    }
    const box = this.node.getBoundingClientRect();
    return box.width > 0 && box.bottom > -MARGIN && box.top < window.innerHeight + MARGIN;
  }

  /** Make the view now. */
  realize(): void {
    if (this.view || this.isDisposed) {
      return;
    }
    this.watcher?.disconnect();
    this.watcher = null;
    this.view = new EditorView({ state: (this.quick ?? this.make)() });
    this.slot.style.height = '';
    this.slot.appendChild(this.view.dom);
    markHidden(this.view.dom);
    if (this.quick) {
      this.quick = null;
      // In the idle time after the frame that paints it: nothing waiting is held up by it.
      requestAnimationFrame(() => requestIdleCallback(() => this.upgrade(), { timeout: 250 }));
    }
  }

  /** The whole view in place of the quick one. */
  private upgrade(): void {
    if (this.view && !this.isDisposed) {
      this.view.setState(this.make());
      markHidden(this.view.dom);
    }
  }

  protected onAfterAttach(): void {
    if (this.view) {
      this.view.requestMeasure();
    } else if (!this.watcher) {
      this.watcher = new IntersectionObserver(entries => entries.some(e => e.isIntersecting) && this.realize(),
        { rootMargin: `${MARGIN}px 0px` });
      this.watcher.observe(this.node);
    }
  }

  protected onBeforeDetach(): void {
    this.watcher?.disconnect();
    this.watcher = null;
  }

  dispose(): void {
    if (!this.isDisposed) {
      this.watcher?.disconnect();
      this.view?.destroy();
    }
    super.dispose();
  }
}

function lineCount(text: string): number {
  let count = 1;
  for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n', at + 1)) {
    count++;
  }
  return count;
}

/** A toggle above each chunk: the chunks the person picks are the ones "Accept" lands. */
class ChunkToggle extends WidgetType {
  constructor(
    private readonly number: number,
    private readonly selected: Set<number>,
    private readonly changed: () => void
  ) {
    super();
  }

  eq(other: ChunkToggle): boolean {
    return other.number === this.number;
  }

  toDOM(): HTMLElement {
    const row = document.createElement('div');
    row.className = 'nbchat-chunk-control';
    const label = row.appendChild(document.createElement('label'));
    const box = label.appendChild(document.createElement('input'));
    box.type = 'checkbox';
    box.checked = this.selected.has(this.number);
    box.addEventListener('change', () => {
      if (box.checked) {
        this.selected.add(this.number);
      } else {
        this.selected.delete(this.number);
      }
      row.classList.toggle('nbchat-mod-selected', box.checked);
      this.changed();
    });
    row.classList.toggle('nbchat-mod-selected', box.checked);
    label.appendChild(document.createTextNode(`chunk ${this.number}`));
    return row;
  }

  ignoreEvent(): boolean {
    return true;
  }
}

function chunkToggles(chunks: KernelChunk[], selected: Set<number>, changed: () => void): Extension {
  return StateField.define<DecorationSet>({
    create(state) {
      const builder = new RangeSetBuilder<Decoration>();
      for (const chunk of chunks) {
        const line = state.doc.lineAt(Math.min(chunk.from_b, state.doc.length));
        const before = chunk.from_b <= line.from;
        const widget = new ChunkToggle(chunk.number, selected, changed);
        // Before the chunk's first line (and before CodeMirror's deleted lines there).
        builder.add(before ? line.from : line.to, before ? line.from : line.to,
          Decoration.widget({ widget, block: true, side: before ? -2 : 1 }));
      }
      return builder.finish();
    },
    update: value => value,
    provide: field => EditorView.decorations.from(field)
  });
}

/** The lines of the proposed text each chunk puts there, marked (the quick view's diff). */
function chunkLines(chunks: KernelChunk[]): Extension {
  return StateField.define<DecorationSet>({
    create(state) {
      const builder = new RangeSetBuilder<Decoration>();
      const mark = Decoration.line({ class: 'nbchat-changed-line' });
      const doc = state.doc;
      for (const chunk of chunks) {
        if (chunk.to_b <= chunk.from_b) {
          continue; // lines deleted only: the merge view shows them
        }
        const last = doc.lineAt(Math.min(chunk.to_b - 1, doc.length)).number;
        for (let n = doc.lineAt(Math.min(chunk.from_b, doc.length)).number; n <= last; n++) {
          builder.add(doc.line(n).from, doc.line(n).from, mark);
        }
      }
      return builder.finish();
    },
    update: value => value,
    provide: field => EditorView.decorations.from(field)
  });
}

/**
 * An edit as the model writes it, on its cell: the text so far, its lines that the cell
 * does not hold marked, and no answer to give (only the stored proposal has Accept).
 */
class StreamingEdit extends Widget {
  private readonly view: EditorView;
  private text = '';

  constructor(
    panel: NotebookPanel,
    private readonly cell: Cell,
    readonly callId: string
  ) {
    super();
    this.addClass('nbchat-streaming-edit');
    this.node.dataset.nbchatCall = callId;
    const head = this.node.appendChild(document.createElement('div'));
    head.className = 'nbchat-proposal-head';
    const title = head.appendChild(document.createElement('span'));
    title.className = 'nbchat-proposal-title';
    title.textContent = 'Proposed edit, being written…';
    const base = new Set(cell.model.sharedModel.getSource().split('\n'));
    const kind = cell.model.type === 'code' ? 'code' : cell.model.type;
    this.view = new EditorView({
      state: EditorState.create({ extensions: [...readOnly(), languageFor(panel, kind, cell), newLines(base)] })
    });
    this.node.appendChild(this.view.dom);
    this.node.addEventListener('mousedown', event => event.stopPropagation());
  }

  /** Show `text`, the source so far: only what changed since the last is given to the view. */
  grow(text: string): void {
    const old = this.text;
    const most = Math.min(old.length, text.length);
    let same = 0;
    while (same < most && old.charCodeAt(same) === text.charCodeAt(same)) {
      same++;
    }
    if (same < old.length || same < text.length) {
      this.view.dispatch({ changes: { from: same, to: old.length, insert: text.slice(same) } });
    }
    this.text = text;
  }

  place(later: () => void): void {
    if (this.cell.isDisposed) {
      this.parent = null;
    } else if (this.cell.isPlaceholder()) {
      void this.cell.ready.then(later);
    } else {
      attach(this.cell, this, 'after-input');
    }
  }

  dispose(): void {
    if (!this.isDisposed) {
      this.view.destroy();
    }
    super.dispose();
  }
}

/** Lines of the text that are none of `base`'s, marked; only those in sight are looked at. */
function newLines(base: Set<string>): Extension {
  const mark = Decoration.line({ class: 'nbchat-changed-line' });
  const build = (view: EditorView): DecorationSet => {
    const builder = new RangeSetBuilder<Decoration>();
    const doc = view.state.doc;
    for (const { from, to } of view.visibleRanges) {
      for (let n = doc.lineAt(from).number, last = doc.lineAt(to).number; n <= last; n++) {
        const line = doc.line(n);
        if (!base.has(line.text)) {
          builder.add(line.from, line.from, mark);
        }
      }
    }
    return builder.finish();
  };
  return ViewPlugin.define(
    view => ({
      decorations: build(view),
      update(update: ViewUpdate) {
        if (update.docChanged || update.viewportChanged) {
          this.decorations = build(update.view);
        }
      }
    }),
    { decorations: plugin => plugin.decorations }
  );
}

function isStreaming(value: unknown): value is Streaming & { op: 'streaming' } {
  const s = value as Streaming & { op: 'streaming' };
  return (
    !!s &&
    s.op === 'streaming' &&
    (s.thread === null || Number.isInteger(s.thread)) &&
    typeof s.call_id === 'string' &&
    typeof s.cell_id === 'string' &&
    typeof s.proposed === 'string'
  );
}

/** The kernel's chunks as the diff's changes, each refined to words inside its own lines. */
function changesOf(chunks: KernelChunk[], a: string, b: string): Change[] {
  const out: Change[] = [];
  for (const c of chunks) {
    const inner = presentableDiff(a.slice(c.from_a, c.to_a), b.slice(c.from_b, c.to_b), { scanLimit: 500, timeout: 20 });
    for (const d of inner) {
      out.push(new Change(d.fromA + c.from_a, d.toA + c.from_a, d.fromB + c.from_b, d.toB + c.from_b));
    }
  }
  return out;
}

/** Python counts code points; a JavaScript string counts UTF-16 units (an emoji is two). */
function toUtf16(chunk: KernelChunk, base: string, proposed: string): KernelChunk {
  return {
    number: chunk.number,
    from_a: unitsAt(base, chunk.from_a),
    to_a: unitsAt(base, chunk.to_a),
    from_b: unitsAt(proposed, chunk.from_b),
    to_b: unitsAt(proposed, chunk.to_b)
  };
}

function unitsAt(text: string, points: number): number {
  if (!/[\ud800-\udfff]/.test(text)) {
    return Math.min(points, text.length);
  }
  let units = 0;
  for (let seen = 0; seen < points && units < text.length; seen++) {
    units += (text.codePointAt(units) ?? 0) > 0xffff ? 2 : 1;
  }
  return units;
}

/**
 * CodeMirror marks hidden characters in the document, not in the deleted lines it
 * draws itself: mark those the same way (each as a `cm-specialChar` span).
 */
function markHidden(root: HTMLElement): void {
  for (const chunk of Array.from(root.querySelectorAll<HTMLElement>('.cm-deletedChunk:not([data-nbchat-marked])'))) {
    chunk.dataset.nbchatMarked = '';
    const walker = document.createTreeWalker(chunk, NodeFilter.SHOW_TEXT);
    const found: globalThis.Text[] = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (HIDDEN.test(node.nodeValue ?? '')) {
        found.push(node as globalThis.Text);
      }
    }
    for (const node of found) {
      const value = node.nodeValue ?? '';
      const parts = document.createDocumentFragment();
      let at = 0;
      for (const match of value.matchAll(HIDDEN_ALL)) {
        parts.append(value.slice(at, match.index));
        const mark = document.createElement('span');
        mark.className = 'cm-specialChar';
        const code = match[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0');
        mark.title = `Control character U+${code}`;
        mark.textContent = '\u2022';
        parts.append(mark);
        at = (match.index ?? 0) + match[0].length;
      }
      parts.append(value.slice(at));
      node.replaceWith(parts);
    }
  }
}

function readOnly(): Extension[] {
  return [
    EditorState.lineSeparator.of('\n'), // offsets count "\r" as the kernel does: one character
    EditorState.readOnly.of(true),
    EditorView.lineWrapping,
    highlightSpecialChars({ addSpecialChars: HIDDEN }),
    jupyterTheme,
    syntaxHighlighting(jupyterHighlightStyle)
  ];
}

/** The notebook's own language for code (from the cell's editor, else any code cell's). */
function languageFor(panel: NotebookPanel, kind: string, cell?: Cell | null): Extension {
  if (kind !== 'code') {
    return [];
  }
  const candidates = cell ? [cell, ...panel.content.widgets] : panel.content.widgets;
  for (const candidate of candidates) {
    if (candidate.model.type !== 'code' || !(candidate.editor instanceof CodeMirrorEditor)) {
      continue;
    }
    const found: Language | null = candidate.editor.editor.state.facet(language);
    if (found) {
      return found.extension;
    }
  }
  return [];
}

/** Where a block at notebook position `index` goes: above cell `index`, or below the last. */
function slot(panel: NotebookPanel, index: number): Spot {
  const cells = panel.content.widgets;
  if (cells.length === 0) {
    return null;
  }
  return index < cells.length ? { cell: cells[Math.max(0, index)], where: 'top' } : { cell: cells[cells.length - 1], where: 'bottom' };
}

function attach(cell: Cell, widget: Widget, where: Where): void {
  const layout = cell.layout as PanelLayout;
  const widgets = layout.widgets;
  const at = widgets.indexOf(widget);
  if (where === 'top') {
    if (at !== 0) {
      layout.insertWidget(0, widget);
    }
  } else if (where === 'bottom') {
    if (at !== widgets.length - 1) {
      layout.addWidget(widget);
    }
  } else if (at < 0) {
    const input = widgets.findIndex(w => w.hasClass('jp-Cell-inputWrapper'));
    layout.insertWidget(input + 1, widget);
  }
}

function cellOf(panel: NotebookPanel, id: string): Cell | null {
  return id ? (panel.content.widgets.find(c => c.model.id === id) ?? null) : null;
}

function keyOf(p: Proposal): string {
  return `${p.thread}:${p.call_id}`;
}

function button(label: string, className: string, onClick: () => void): HTMLButtonElement {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = `jp-Button nbchat-proposal-button ${className}`;
  b.textContent = label;
  b.addEventListener('click', onClick);
  return b;
}

function isProposal(value: unknown): value is Proposal {
  const p = value as Proposal;
  return (
    !!p &&
    typeof p === 'object' &&
    Number.isInteger(p.thread) &&
    typeof p.call_id === 'string' &&
    TOOLS.includes(p.tool) &&
    typeof p.cell_id === 'string' &&
    (p.index === null || p.index === undefined || Number.isInteger(p.index)) &&
    typeof p.base === 'string' &&
    typeof p.proposed === 'string' &&
    (typeof p.why === 'string' || p.why === undefined) &&
    Array.isArray(p.chunks) &&
    p.chunks.every(
      c => !!c && Number.isInteger(c.number) && [c.from_a, c.to_a, c.from_b, c.to_b].every(n => Number.isInteger(n) && n >= 0)
    )
  );
}
