/**
 * Code suggestions as ghost text: an inline completion provider for JupyterLab's
 * inline completer (JupyterLab >= 4.1), in notebook cells, consoles and files.
 *
 * The completer waits `debouncerDelay` ms after the last key press (nbchat's
 * default: 600 ms, so steady typing sends at most ~2 requests a second), then
 * calls `fetch`. The request goes to the Jupyter server, `POST nbchat/complete`
 * (`nbchat.jupyter.server.complete`), which asks the model endpoint with
 * the server's settings and keys and streams the suggestion back as NDJSON
 * lines `{"text": piece}` … `{"done": true}` or `{"error": "one line"}`.
 * `fetch` returns the first piece; `stream` yields the rest as it arrives.
 *
 * A request ends (its fetch aborted, which closes the server's request to the
 * model) when a newer request starts, when the document it was made for
 * changes (the person typed on, or accepted it), or at MAX_SUGGESTION characters.
 *
 * The suggestion is text: the completer shows it with `innerText` and inserts
 * it into the editor's model; nothing from the model is parsed as markup here.
 */
import type {
  CompletionHandler,
  ICompletionProviderManager,
  IInlineCompletionContext,
  IInlineCompletionItem,
  IInlineCompletionList,
  IInlineCompletionProvider
} from '@jupyterlab/completer';
import { ServerConnection } from '@jupyterlab/services';
import { LabIcon } from '@jupyterlab/ui-components';
import type { Widget } from '@lumino/widgets';

export const PROVIDER_ID = 'nbchat';
export const ROUTE = 'nbchat/complete';
/** Characters of a suggestion kept; the request stops there. */
export const MAX_SUGGESTION = 4000;
/** Earlier cells sent with a notebook cell's request (the server keeps as many). */
export const MAX_CELLS = 20;

/** The provider's settings, as the Settings Editor shows them under Inline Completer › nbchat. */
export interface ISuggestionSettings {
  enabled: boolean;
  model: string;
  maxTokens: number;
  debouncerDelay: number;
  timeout: number;
}

export const DEFAULTS: ISuggestionSettings = {
  // Opt-in: every pause in typing sends the code around the cursor to the model endpoint.
  enabled: false,
  model: '',
  maxTokens: 64,
  debouncerDelay: 600,
  timeout: 15000
};

const SCHEMA: IInlineCompletionProvider['schema'] = {
  properties: {
    model: {
      title: 'Model',
      description:
        "The model that suggests code; empty: the server's default (NBCHAT_MODEL, else the endpoint's first model). " +
        'The endpoint and its keys are set on the server (NBCHAT_BASE_URL, NBCHAT_API_KEY, ...).',
      type: 'string'
    },
    maxTokens: {
      title: 'Maximum tokens',
      description: 'The longest suggestion asked for, in tokens (1 to 512).',
      type: 'number',
      multipleOf: 1,
      minimum: 1,
      maximum: 512
    }
  },
  default: { ...DEFAULTS }
};

const sparkIcon = new LabIcon({
  name: 'nbchat:suggestion',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">' +
    '<path class="jp-icon3" fill="#616161" d="M12 2l2.2 6.6L21 11l-6.8 2.4L12 20l-2.2-6.6L3 11l6.8-2.4z"/></svg>'
});

type Watcher = (sender: unknown, change: { sourceChange?: unknown } | null) => void;

interface IEditorLike {
  model: {
    sharedModel: {
      getSource(): string;
      changed: { connect(fn: Watcher): unknown; disconnect(fn: Watcher): unknown };
    };
    mimeType: string;
  };
}

interface IWidgetParts {
  context?: { path?: string };
  content?: {
    activeCell?: { editor?: IEditorLike | null } | null;
    widgets?: ReadonlyArray<{ editor?: IEditorLike | null; model: { type: string; sharedModel: { getSource(): string } } }>;
    editor?: IEditorLike;
  };
  console?: { promptCell?: { editor?: IEditorLike | null } | null };
  sessionContext?: { path?: string };
}

/** One request to the server and the suggestion it is streaming. */
class Suggestion {
  readonly controller = new AbortController();
  text = '';
  done = false;
  error = '';
  private wake: (() => void) | null = null;
  private readonly unwatch: () => void;

  constructor(editor: IEditorLike | null) {
    if (editor) {
      const shared = editor.model.sharedModel;
      // The text changed (typed on, the suggestion accepted): this suggestion is stale.
      const changed: Watcher = (_, change) => {
        if (!change || change.sourceChange) {
          this.stop();
        }
      };
      shared.changed.connect(changed);
      this.unwatch = () => shared.changed.disconnect(changed);
    } else {
      this.unwatch = () => undefined;
    }
  }

  /** End the request (idempotent): the fetch is aborted, so the server stops asking the model. */
  stop(): void {
    if (!this.done) {
      this.done = true;
      this.controller.abort();
    }
    this.unwatch();
    this.notify();
  }

  add(piece: string): void {
    const room = MAX_SUGGESTION - this.text.length;
    let kept = piece.length > room ? piece.slice(0, room) : piece;
    if (kept.length < piece.length && /[\uD800-\uDBFF]$/.test(kept)) {
      kept = kept.slice(0, -1); // no half of a surrogate pair
    }
    this.text += kept;
    if (kept.length < piece.length || this.text.length >= MAX_SUGGESTION) {
      this.stop();
    }
    this.notify();
  }

  finish(error = ''): void {
    this.error = this.error || error;
    this.done = true;
    this.unwatch();
    this.notify();
  }

  /** Resolves at the next change (more text, the end). */
  changed(): Promise<void> {
    return new Promise(resolve => {
      const previous = this.wake;
      this.wake = () => {
        previous?.();
        resolve();
      };
    });
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}

export class NbchatInlineProvider implements IInlineCompletionProvider {
  readonly identifier = PROVIDER_ID;
  readonly name = 'nbchat';
  readonly icon = sparkIcon;
  readonly schema = SCHEMA;

  private settings: ISuggestionSettings = { ...DEFAULTS };
  private current: Suggestion | null = null;
  private readonly streams = new Map<string, Suggestion>();
  private counter = 0;

  constructor(private readonly serverSettings: ServerConnection.ISettings) {}

  configure(settings: { [property: string]: unknown }): void {
    const value = { ...DEFAULTS, ...(settings ?? {}) } as ISuggestionSettings;
    this.settings = {
      enabled: value.enabled === true,
      model: typeof value.model === 'string' ? value.model : '',
      maxTokens: Number.isInteger(value.maxTokens) ? Math.min(512, Math.max(1, value.maxTokens)) : DEFAULTS.maxTokens,
      debouncerDelay: typeof value.debouncerDelay === 'number' ? value.debouncerDelay : DEFAULTS.debouncerDelay,
      timeout: typeof value.timeout === 'number' ? value.timeout : DEFAULTS.timeout
    };
    if (!this.settings.enabled) {
      this.current?.stop();
    }
  }

  async fetch(request: CompletionHandler.IRequest, context: IInlineCompletionContext): Promise<IInlineCompletionList> {
    this.current?.stop(); // superseded: the server sees the disconnect
    this.current = null;
    if (!this.settings.enabled || !isCode(request.mimeType ?? '')) {
      return { items: [] };
    }
    const chars = Array.from(request.text); // the offset counts code points, not UTF-16 units
    const prefix = chars.slice(0, request.offset).join('');
    const suffix = chars.slice(request.offset).join('');
    const { editor, path, cells } = describe(context.widget, request.text);
    const suggestion = new Suggestion(editor);
    this.current = suggestion;
    const body = {
      prefix,
      suffix,
      path,
      cells,
      language: language(request.mimeType ?? ''),
      model: this.settings.model,
      max_tokens: this.settings.maxTokens
    };
    void this.read(suggestion, body);
    // The completer stops waiting after `timeout`; so does the request.
    const timer = setTimeout(() => suggestion.text === '' && suggestion.stop(), this.settings.timeout);
    while (!suggestion.done && suggestion.text === '') {
      await suggestion.changed();
    }
    clearTimeout(timer);
    if (suggestion.text === '') {
      if (suggestion.error) {
        console.warn(`nbchat suggestion: ${suggestion.error}`);
      }
      return { items: [] };
    }
    const item: IInlineCompletionItem = { insertText: suggestion.text };
    if (!suggestion.done) {
      const token = `nbchat-${++this.counter}`;
      this.streams.set(token, suggestion);
      item.token = token;
      item.isIncomplete = true;
    }
    return { items: [item] };
  }

  async *stream(token: string): AsyncGenerator<{ response: IInlineCompletionItem }, undefined, unknown> {
    const suggestion = this.streams.get(token);
    this.streams.delete(token);
    if (!suggestion) {
      return;
    }
    let sent = -1;
    while (true) {
      if (suggestion.text.length !== sent) {
        sent = suggestion.text.length;
        const response: IInlineCompletionItem = { insertText: suggestion.text, isIncomplete: !suggestion.done };
        if (suggestion.done && suggestion.error) {
          response.error = { message: suggestion.error };
        }
        yield { response };
      }
      if (suggestion.done) {
        return;
      }
      await suggestion.changed();
    }
  }

  private async read(suggestion: Suggestion, body: object): Promise<void> {
    const settings = this.serverSettings;
    let error = '';
    try {
      const response = await ServerConnection.makeRequest(
        settings.baseUrl + ROUTE,
        { method: 'POST', body: JSON.stringify(body), signal: suggestion.controller.signal, cache: 'no-store' },
        settings
      );
      if (!response.ok || !response.body) {
        error = `the server answered ${response.status} ${response.statusText}`.trim();
        return;
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      while (!suggestion.done) {
        const { value, done } = await reader.read();
        buffer += decoder.decode(value, { stream: !done });
        let end: number;
        while ((end = buffer.indexOf('\n')) >= 0 && !suggestion.done) {
          const line = buffer.slice(0, end).trim();
          buffer = buffer.slice(end + 1);
          error = line ? take(suggestion, line) : '';
          if (error || suggestion.done) {
            return;
          }
        }
        if (done) {
          return;
        }
      }
    } catch (caught) {
      if (!suggestion.controller.signal.aborted) {
        error = `${caught}`;
      }
    } finally {
      if (!suggestion.done) {
        suggestion.controller.abort(); // whatever is left unread
      }
      suggestion.finish(error);
      if (this.current === suggestion) {
        this.current = null;
      }
    }
  }
}

/** Apply one NDJSON line; returns an error message, if the line is one. */
function take(suggestion: Suggestion, line: string): string {
  let data: unknown;
  try {
    data = JSON.parse(line);
  } catch {
    return 'the server sent a line that is not JSON';
  }
  if (!data || typeof data !== 'object') {
    return '';
  }
  const { text, done, error } = data as { text?: unknown; done?: unknown; error?: unknown };
  if (typeof text === 'string' && text) {
    suggestion.add(text);
  } else if (typeof error === 'string') {
    return error.slice(0, 500) || 'the suggestion failed';
  } else if (done === true) {
    suggestion.finish();
  }
  return '';
}

function isCode(mimeType: string): boolean {
  return !/markdown|gfm|text\/plain/i.test(mimeType || '');
}

function language(mimeType: string): string {
  if (/python/i.test(mimeType)) {
    return 'python';
  }
  const name = (mimeType || '').split('/').pop() || '';
  return name.replace(/^x-/, '').replace(/src$/, '').slice(0, 40) || 'python';
}

/** The editor the request is for, the document's path, and (in a notebook) the earlier cells' sources. */
function describe(widget: Widget, text: string): { editor: IEditorLike | null; path: string; cells: string[] } {
  const parts = widget as unknown as IWidgetParts;
  const path = parts.context?.path ?? parts.sessionContext?.path ?? '';
  const content = parts.content;
  const cells: string[] = [];
  let editor: IEditorLike | null = null;
  if (content?.widgets && content.activeCell !== undefined) {
    const index = content.widgets.findIndex(cell => cell === content.activeCell);
    editor = content.activeCell?.editor ?? null;
    for (const cell of content.widgets.slice(Math.max(0, index - MAX_CELLS), Math.max(0, index))) {
      if (cell.model.type !== 'raw') {
        cells.push(cell.model.sharedModel.getSource());
      }
    }
  } else if (content?.editor) {
    editor = content.editor;
  } else if (parts.console?.promptCell?.editor) {
    editor = parts.console.promptCell.editor;
  }
  if (editor && editor.model.sharedModel.getSource() !== text) {
    editor = null; // not the editor the request came from: don't tie the request to it
  }
  return { editor, path, cells };
}

/** Register the provider (JupyterLab >= 4.1; earlier versions have no inline completer). */
export function registerSuggestions(
  manager: ICompletionProviderManager,
  serverSettings: ServerConnection.ISettings
): NbchatInlineProvider | null {
  if (typeof manager.registerInlineProvider !== 'function') {
    return null;
  }
  const provider = new NbchatInlineProvider(serverSettings);
  manager.registerInlineProvider(provider);
  return provider;
}
