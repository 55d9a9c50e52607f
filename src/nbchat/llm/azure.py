"""Azure OpenAI: the OpenAI chat wire, under a resource's deployment and an ``api-version``.

The base URL is the resource (``https://RESOURCE.openai.azure.com``), the
model is the deployment's name, and the key goes in the ``api-key`` header
(a Microsoft Entra ID token in ``AZURE_OPENAI_AD_TOKEN`` as a bearer, see
:func:`nbchat.llm._http.headers_for`). Azure lists no deployments on this
API, so the model list is the configured deployment.
"""

from __future__ import annotations

from .openai import OpenAIProvider


class AzureProvider(OpenAIProvider):
    """An Azure OpenAI resource; the placeholders are filled in by the client per request."""

    name = "azure"
    models_path = ""  # no deployment listing on the data-plane API
    chat_path = "/openai/deployments/{model}/chat/completions?api-version={api_version}"
