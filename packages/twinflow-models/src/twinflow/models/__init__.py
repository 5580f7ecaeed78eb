"""twinflow.models: chat models for OpenAI-compatible servers, Ollama, Anthropic and Gemini,
and `open_model`, which makes one from a name (`embedded`, a URL, `gemini:gemini-2.5-flash`)
through `PROVIDERS`, the one provider table (`twinflow models` prints it).

The only third-party dependency is pydantic; every request goes through the kernel's injected
`Transport`. Each provider is one module with its chat model and its wire mapping beside it,
and one row of the provider table `open_model` reads. `preflight` tells what a server's
decoder would not enforce of a schema; `embedded_server` starts the bundled SmolLM2 model
(the `embedded` extra) for as long as a block runs.

Errors::

    TwinflowError (twinflow.trace)
    ├── UserError (twinflow.vocab)         also a bad max_attempts (vocab's one check)
    │   ├── SchemaError                    refused before any request (`.reason`: unenforced,
    │   │                                  uncompilable; `.report`)
    │   └── ModelSetupError                a model not set up as asked (`.reason`: name,
    │                                      not-installed, dialect, mode)
    ├── ModelError                         raised by twinflow.models
    │   ├── SchemaError                    (also a UserError, above)
    │   ├── ModelSetupError                (also a UserError, above)
    │   └── MalformedResponseError         the server answered 2xx with a body that is not its
    │                                      wire format (`.reason`: malformed, or refused: a
    │                                      safety block such as Gemini's)
    ├── VocabError (twinflow.vocab)
    │   └── StructuredOutputError          no answer validated in max_attempts (`.attempts`)
    └── KernelError (twinflow.kernel)
        └── TransportError                 connect, timeout, status, ... (its `.reason`):
                                           the kernel's, propagated unchanged, never retried or wrapped
"""

from twinflow.models._anthropic import AnthropicChatModel as AnthropicChatModel
from twinflow.models._errors import MalformedResponseError as MalformedResponseError
from twinflow.models._errors import ModelError as ModelError
from twinflow.models._errors import ModelSetupError as ModelSetupError
from twinflow.models._errors import SchemaError as SchemaError
from twinflow.models._ollama import OllamaChatModel as OllamaChatModel
from twinflow.models._openai import OpenAICompatibleChatModel as OpenAICompatibleChatModel
from twinflow.models._providers import open_model as open_model
