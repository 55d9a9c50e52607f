/**
 * The Connect dialog: connect a model endpoint once. The key goes to the Jupyter
 * server (login + XSRF, `ServerConnection`), which keeps it in the keyring or a
 * 0600 file and never sends it back; every new kernel then answers without it.
 * Everything the server sends is shown as text (textContent), never as HTML.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { ServerConnection } from '@jupyterlab/services';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

export const CONNECTIONS_ROUTE = 'nbchat/connections';
export const CONNECTIONS_TEST_ROUTE = 'nbchat/connections/test';
export const CONNECTIONS_CHOICE_ROUTE = 'nbchat/connections/choice';
export const CONNECT_EVENT = 'nbchat:connect';

export const plugIcon = new LabIcon({
  name: 'nbchat:plug',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">' +
    '<path class="jp-icon3" fill="#616161" d="M8 2h2v5h4V2h2v5h1a1 1 0 0 1 1 1v3a6 6 0 0 1-5 ' +
    '5.92V22h-2v-5.08A6 6 0 0 1 6 11V8a1 1 0 0 1 1-1h1z"/></svg>'
});

interface Preset {
  kind: string;
  label: string;
  base_url: string;
  needs_key: boolean;
  key_hint: string;
}

interface Endpoint {
  name: string;
  kind: string;
  label: string;
  base_url: string;
  models: string[];
  /** Where its key is kept (null: none is); never the key. */
  key: string | null;
  provided?: boolean;
}

interface Choice {
  endpoint: string;
  model: string;
}

interface Listing {
  endpoints: Endpoint[];
  chat: Choice | null;
  suggestions: Choice | null;
  presets: Preset[];
  keys: string;
  /** False where the administrator allows only the endpoints the server provides. */
  own_allowed?: boolean;
}

type Answer = { ok: true; data: any } | { ok: false; error: string };

/** Call one of the Connect routes; a failure is one line of text. */
async function call(settings: ServerConnection.ISettings, route: string, method: string, body?: object): Promise<Answer> {
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(
      settings.baseUrl + route,
      { method, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' },
      settings
    );
  } catch (error) {
    return { ok: false, error: `the Jupyter server did not answer: ${error}` };
  }
  let data: any = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (data && typeof data.error === 'string') {
    return { ok: false, error: data.error };
  }
  if (!response.ok || data === null) {
    return { ok: false, error: `the Jupyter server answered ${response.status} ${response.statusText}`.trim() };
  }
  return { ok: true, data };
}

/**
 * Characters that draw nothing or reorder the text around them (bidi controls, zero-width
 * ones, C0/C1 controls), which a hostile model name could use to look like another one.
 */
const UNSEEN = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;

/** Server text as a person should see it: each unseen character written as its code point. */
export function visible(text: string): string {
  return text.replace(UNSEEN, c => `\u27e8U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}\u27e9`);
}

function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  parent: HTMLElement | null,
  className = '',
  text = ''
): HTMLElementTagNameMap[K] {
  const found = document.createElement(tag);
  if (className) {
    found.className = className;
  }
  if (text) {
    found.textContent = visible(text);
  }
  parent?.appendChild(found);
  return found;
}

/** A labelled field: the label's text, then the control, on one row. */
function field<T extends HTMLElement>(parent: HTMLElement, label: string, control: T): T {
  const row = element('label', parent, 'nbchat-connect-field');
  element('span', row, 'nbchat-connect-label', label);
  row.appendChild(control);
  return control;
}

function fill(select: HTMLSelectElement, options: [string, string][], chosen = ''): void {
  select.replaceChildren();
  for (const [value, text] of options) {
    const option = element('option', select, '', text);
    option.value = value;
  }
  if (options.some(([value]) => value === chosen)) {
    select.value = chosen;
  }
}

/** The dialog's body: the connected endpoints, then the form that connects one. */
export class ConnectBody extends Widget {
  private listing: Listing | null = null;
  private readonly where = element('p', null, 'nbchat-connect-where');
  private readonly list = element('ul', null, 'nbchat-connect-list');
  private readonly kind = element('select', null, 'nbchat-connect-kind');
  private readonly name = element('input', null, 'nbchat-connect-name');
  private readonly url = element('input', null, 'nbchat-connect-url');
  private readonly key = element('input', null, 'nbchat-connect-key');
  private readonly version = element('input', null, 'nbchat-connect-version');
  private readonly versionRow: HTMLElement;
  private readonly deployment = element('input', null, 'nbchat-connect-deployment');
  private readonly deploymentRow: HTMLElement;
  private readonly form = element('div', null, 'nbchat-connect-form');
  private readonly notOwn = element('p', null, 'nbchat-connect-not-own');
  private readonly result = element('div', null, 'nbchat-connect-result');
  private readonly chat = element('select', null, 'nbchat-connect-chat');
  private readonly suggestions = element('select', null, 'nbchat-connect-suggestions');
  private readonly saved = element('div', null, 'nbchat-connect-saved');
  private models: string[] = [];
  private nameTyped = false;

  constructor(private readonly settings: ServerConnection.ISettings) {
    super();
    this.addClass('nbchat-connect');
    const node = this.node;
    node.appendChild(this.where);
    element('h3', node, '', 'Connected');
    node.appendChild(this.list);
    this.notOwn.hidden = true;
    this.notOwn.textContent =
      'The administrator provides this server\u2019s endpoints; connecting your own is not allowed here.';
    node.appendChild(this.notOwn);
    const form = this.form;
    node.appendChild(form);
    element('h3', form, '', 'Connect an endpoint');
    field(form, 'Kind', this.kind);
    field(form, 'Name', this.name).spellcheck = false;
    field(form, 'URL', this.url).spellcheck = false;
    this.key.type = 'password';
    this.key.autocomplete = 'off';
    this.key.spellcheck = false;
    field(form, 'Key', this.key);
    field(form, 'API version', this.version).placeholder = 'e.g. 2024-10-21';
    this.versionRow = this.version.parentElement as HTMLElement;
    field(form, 'Deployment', this.deployment).placeholder = 'the deployment\u2019s name (Azure lists none)';
    this.deployment.spellcheck = false;
    this.deploymentRow = this.deployment.parentElement as HTMLElement;
    const test = element('button', form, 'jp-mod-styled nbchat-connect-test', 'Test');
    test.type = 'button';
    this.result.setAttribute('role', 'status');
    form.appendChild(this.result);
    field(form, 'Chat model', this.chat);
    field(form, 'Suggestions model', this.suggestions);
    const save = element('button', form, 'jp-mod-styled jp-mod-accept nbchat-connect-save', 'Save');
    save.type = 'button';
    this.saved.setAttribute('role', 'status');
    form.appendChild(this.saved);
    // Enter in a field tests the endpoint (the dialog has no default button to close it).
    form.addEventListener('keydown', event => {
      if (event.key === 'Enter' && event.target instanceof HTMLInputElement) {
        event.preventDefault();
        void this.test();
      }
    });
    this.kind.addEventListener('change', () => this.kindChanged());
    this.name.addEventListener('input', () => (this.nameTyped = this.name.value !== ''));
    test.addEventListener('click', () => void this.test());
    save.addEventListener('click', () => void this.save());
    this.fillModels();
    void this.refresh();
  }

  /** Ask the server again for what is connected, and redraw the list. */
  async refresh(): Promise<void> {
    const answer = await call(this.settings, CONNECTIONS_ROUTE, 'GET');
    if (!answer.ok) {
      this.where.textContent = visible(`nbchat: ${answer.error}`);
      return;
    }
    this.draw(answer.data as Listing);
  }

  private draw(listing: Listing): void {
    const first = this.listing === null;
    this.listing = listing;
    this.where.textContent = visible(`Keys are kept in ${listing.keys}; they never come back to this page.`);
    this.list.replaceChildren();
    if (!listing.endpoints.length) {
      element('li', this.list, 'nbchat-connect-none', 'None yet.');
    }
    for (const endpoint of listing.endpoints) {
      const item = element('li', this.list, 'nbchat-connect-endpoint');
      item.dataset.name = endpoint.name;
      const uses = [
        listing.chat?.endpoint === endpoint.name ? `chat: ${listing.chat.model}` : '',
        listing.suggestions?.endpoint === endpoint.name ? `suggestions: ${listing.suggestions.model}` : ''
      ].filter(Boolean);
      const kept = endpoint.key ? `key kept in ${endpoint.key}` : 'no key kept';
      const text = `${endpoint.name} — ${endpoint.label}, ${endpoint.base_url}; ` +
        `${kept}${uses.length ? '; ' + uses.join(', ') : ''}`;
      element('span', item, 'nbchat-connect-endpoint-text', text);
      if (!endpoint.provided && listing.own_allowed !== false) {
        const remove = element('button', item, 'jp-mod-styled jp-mod-warn nbchat-connect-remove', 'Remove');
        remove.type = 'button';
        remove.title = `Forget ${endpoint.name} and its key`;
        remove.addEventListener('click', () => void this.remove(endpoint.name));
      }
    }
    this.form.hidden = listing.own_allowed === false;
    this.notOwn.hidden = listing.own_allowed !== false;
    if (first) {
      fill(this.kind, listing.presets.map(p => [p.kind, p.label]), 'openai');
      this.kindChanged();
    }
  }

  private preset(): Preset | undefined {
    return this.listing?.presets.find(p => p.kind === this.kind.value);
  }

  private kindChanged(): void {
    const preset = this.preset();
    if (!preset) {
      return;
    }
    if (!this.nameTyped) {
      this.name.value = preset.kind;
    }
    this.url.value = preset.base_url;
    this.url.placeholder = preset.base_url ? '' : preset.kind === 'azure'
      ? 'https://RESOURCE.openai.azure.com (required)' : 'http://HOST:PORT/v1 (required)';
    this.url.required = !preset.base_url;
    this.key.placeholder = preset.needs_key ? `required; ${preset.key_hint}` : preset.key_hint || 'none needed';
    this.versionRow.hidden = preset.kind !== 'azure';
    this.deploymentRow.hidden = preset.kind !== 'azure';
  }

  private request(): Record<string, unknown> {
    const body: Record<string, unknown> = {
      kind: this.kind.value,
      name: this.name.value.trim(),
      base_url: this.url.value.trim()
    };
    if (this.key.value) {
      body.key = this.key.value;
    }
    if (this.kind.value === 'azure' && this.version.value.trim()) {
      body.api_version = this.version.value.trim();
    }
    if (this.kind.value === 'azure' && this.deployment.value.trim()) {
      body.model = this.deployment.value.trim();
    }
    return body;
  }

  private missing(): string {
    if (!this.url.value.trim()) {
      return 'Give the endpoint\u2019s URL.';
    }
    return this.name.value.trim() ? '' : 'Give the endpoint a name.';
  }

  /** List the endpoint's models with the key given (or the one kept under its name). */
  async test(): Promise<void> {
    const missing = this.missing();
    this.result.classList.remove('nbchat-connect-error');
    if (missing) {
      this.result.textContent = missing;
      this.result.classList.add('nbchat-connect-error');
      return;
    }
    this.result.textContent = 'Testing…';
    const answer = await call(this.settings, CONNECTIONS_TEST_ROUTE, 'POST', this.request());
    this.result.replaceChildren();
    if (!answer.ok) {
      this.result.textContent = visible(answer.error);
      this.result.classList.add('nbchat-connect-error');
      this.models = [];
    } else {
      this.models = (answer.data.models as unknown[]).filter((m): m is string => typeof m === 'string');
      element('div', this.result, '', this.models.length
        ? `${this.models.length} model${this.models.length === 1 ? '' : 's'}:` : 'It answered, listing no model.');
      const list = element('ul', this.result, 'nbchat-connect-models');
      for (const model of this.models) {
        element('li', list, '', model);
      }
    }
    this.fillModels();
  }

  private fillModels(): void {
    const name = this.name.value.trim();
    const chat = this.listing?.chat?.endpoint === name ? this.listing.chat.model : '';
    const suggested = this.listing?.suggestions?.endpoint === name ? this.listing.suggestions.model : '';
    const options: [string, string][] = this.models.map(m => [m, m]);
    fill(this.chat, [['', this.models.length ? '(keep as is)' : '(Test first)'], ...options], chat || this.models[0]);
    fill(this.suggestions, [['', '(keep as is)'], ...options], suggested);
  }

  /** Keep the key and the connection, then the models chosen; the key field is emptied. */
  async save(): Promise<void> {
    const missing = this.missing();
    this.saved.classList.remove('nbchat-connect-error');
    if (missing) {
      this.saved.textContent = missing;
      this.saved.classList.add('nbchat-connect-error');
      return;
    }
    this.saved.textContent = 'Saving…';
    const name = this.name.value.trim();
    const answer = await call(this.settings, CONNECTIONS_ROUTE, 'POST', { ...this.request(), models: this.models });
    if (!answer.ok) {
      this.saved.textContent = visible(answer.error);
      this.saved.classList.add('nbchat-connect-error');
      return;
    }
    this.key.value = '';
    let listing = answer.data as Listing;
    const choice: Record<string, Choice> = {};
    if (this.chat.value) {
      choice.chat = { endpoint: name, model: this.chat.value };
    }
    if (this.suggestions.value) {
      choice.suggestions = { endpoint: name, model: this.suggestions.value };
    }
    if (Object.keys(choice).length) {
      const chosen = await call(this.settings, CONNECTIONS_CHOICE_ROUTE, 'PUT', choice);
      if (!chosen.ok) {
        this.saved.textContent = visible(`Connected, but the models were not chosen: ${chosen.error}`);
        this.saved.classList.add('nbchat-connect-error');
        void this.refresh();
        return;
      }
      listing = chosen.data as Listing;
    }
    this.draw(listing);
    this.saved.textContent = `Connected ${name}. New kernels use it without --key.`;
  }

  private async remove(name: string): Promise<void> {
    const answer = await call(this.settings, `${CONNECTIONS_ROUTE}/${encodeURIComponent(name)}`, 'DELETE');
    if (!answer.ok) {
      this.saved.textContent = visible(answer.error);
      this.saved.classList.add('nbchat-connect-error');
      return;
    }
    this.draw(answer.data as Listing);
  }
}

let open = false;

/** Show the Connect dialog (one at a time). */
export async function showConnect(settings: ServerConnection.ISettings): Promise<void> {
  if (open) {
    return;
  }
  open = true;
  try {
    await showDialog({
      title: 'nbchat: Connect a model',
      body: new ConnectBody(settings),
      buttons: [Dialog.cancelButton({ label: 'Close' })],
      defaultButton: -1 // Enter in a field must not close the dialog and lose what was typed
    });
  } finally {
    open = false;
  }
}
